"""What is wrong with an image index before a run starts: a class folder with no image, a single class,
and the same file in two splits (a test image also trained on makes the test accuracy a lie).

Duplicates are found by content, cheaply: only files whose byte size occurs in more than one split are
read and hashed (SHA-256), so a folder of a million images costs a ``stat`` each and a few reads.
"""

from __future__ import annotations

import hashlib
import os
from collections import defaultdict

import numpy as np

from .index import ImageIndex

SPLIT_NAMES = ("train", "val", "test")
SHOWN = 3   # duplicate pairs named in the message


def index_problems(index: ImageIndex, where: str) -> list[str]:
    """Empty class folders and a single class, each as one ``field: message`` line."""
    problems = []
    if index.empty_classes:
        names = ", ".join(f"'{c}'" for c in index.empty_classes[:5])
        more = f" and {len(index.empty_classes) - 5} more" if len(index.empty_classes) > 5 else ""
        problems.append(f"{where}: {index.root}: class folder {names}{more} holds no image (add images or "
                        "remove the folder: every class needs samples)")
    present = np.unique(index.labels)
    if len(index.classes) < 2 or len(present) < 2:
        problems.append(f"{where}: {index.root}: a single class ('{index.classes[int(present[0])]}'); a classifier "
                        "needs at least two")
    return problems


def duplicates_across(index: ImageIndex, split_of: np.ndarray) -> list[tuple[str, str, str, str]]:
    """(split, path, other split, other path) for each file whose bytes are also in another split."""
    sizes = np.array([os.stat(index.path(i)).st_size for i in range(len(index))], dtype=np.int64)
    by_size: dict[int, set[int]] = defaultdict(set)
    for size, split in zip(sizes.tolist(), split_of.tolist(), strict=True):
        by_size[size].add(split)
    suspects = [i for i, size in enumerate(sizes.tolist()) if len(by_size[size]) > 1]
    first_of: dict[tuple[int, bytes], tuple[int, int]] = {}   # (size, hash) -> (split, file) first seen per split
    seen: dict[tuple[int, bytes], dict[int, int]] = defaultdict(dict)
    for i in suspects:
        with open(index.path(i), "rb") as f:
            key = (int(sizes[i]), hashlib.sha256(f.read()).digest())
        seen[key].setdefault(int(split_of[i]), i)
        first_of.setdefault(key, (int(split_of[i]), i))
    out = []
    for by_split in seen.values():
        if len(by_split) > 1:
            (s1, a), (s2, b) = sorted(by_split.items())[:2]
            out.append((SPLIT_NAMES[s1], index.path(a), SPLIT_NAMES[s2], index.path(b)))
    return out


def duplicate_problem(dups: list[tuple[str, str, str, str]], where: str) -> str:
    shown = "; ".join(f"{a} ({sa}) = {b} ({sb})" for sa, a, sb, b in dups[:SHOWN])
    more = f" and {len(dups) - SHOWN} more" if len(dups) > SHOWN else ""
    return (f"{where}: {len(dups)} file(s) in more than one split: {shown}{more} (remove the copies, or set "
            "data.images.duplicates to 'ignore')")
