"""What the Train dialog's dataset view shows of an image folder or CSV, read as little as it can.

The index (a ``scandir`` per class folder, nothing decoded) gives the class histogram and the splits;
only the few samples shown per class are decoded, at the graph's channels, so a folder of 60,000
images opens in about the time its directory listing takes. A shown file that does not decode is
listed with its reason (as the loader would skip it); :func:`check_files` decodes every file, for a
user who asks, stoppable between two files. :func:`augmented_views` runs the run's own train
transform (:func:`trainer.data.images.transforms.train_transform`) on one real sample.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ...spec import ImageSpec
from .decode import decode
from .index import SPLIT_CODES, ImageIndex, index_images
from .report import index_problems
from .transforms import eval_transform, train_transform

PER_CLASS = 4        # samples decoded per class shown
MAX_CLASSES = 16     # classes whose samples are shown (all are counted)


@dataclass
class ImagePreview:
    """A dataset view of an image index: every class counted, a few samples of the first classes decoded."""

    root: str
    classes: list[str]
    counts: dict[str, int]                       # images per class (of the train folder when the source splits)
    splits: dict[str, int]                       # images per split the source defines ({} when it splits none)
    samples: dict[str, list[tuple[str, np.ndarray]]]   # class -> [(file, uint8 (C, H, W) as the eval transform gives)]
    bad: list[tuple[str, str]] = field(default_factory=list)   # (file, why it cannot be read) among those read
    problems: list[str] = field(default_factory=list)          # empty class folders, a single class
    read: int = 0                                              # files decoded to show this

    @property
    def size(self) -> int:
        return sum(self.counts.values())


def preview_images(path: Path, channels: int, size: tuple[int, int], im: ImageSpec | None = None, *,
                   per_class: int = PER_CLASS, max_classes: int = MAX_CLASSES, seed: int = 0,
                   index: ImageIndex | None = None) -> ImagePreview:
    """Index ``path`` and decode ``per_class`` samples (picked by ``seed``) of its first ``max_classes``
    classes at ``channels``, resized and centre-cropped to ``size`` as evaluation sees them."""
    index = index if index is not None else index_images(path)
    pool = index.labels if index.split_of is None else index.labels[index.split_of == SPLIT_CODES["train"]]
    counts = np.bincount(pool, minlength=len(index.classes))     # what the run's fractions split
    splits: dict[str, int] = {}
    if index.split_of is not None:
        codes = np.bincount(index.split_of.astype(np.int64), minlength=len(SPLIT_CODES))
        splits = {name: int(codes[code]) for name, code in SPLIT_CODES.items() if codes[code]}
    view = ImagePreview(index.root, list(index.classes), {c: int(n) for c, n in zip(index.classes, counts, strict=True)},
                        splits, {}, problems=index_problems(index, "data.dataset"))
    rng = np.random.default_rng(seed)
    resize = eval_transform(im or ImageSpec(), size)
    for c, name in enumerate(index.classes[:max_classes]):
        rows = np.flatnonzero(index.labels == c)
        picks = np.sort(rng.choice(rows, size=min(per_class, len(rows)), replace=False)) if len(rows) else rows
        shown: list[tuple[str, np.ndarray]] = []
        for i in picks.tolist():
            image = decode(index.path(i), channels)
            view.read += 1
            rel = index.files[i].decode(errors="replace")
            if isinstance(image, str):
                view.bad.append((rel, image))
            else:
                shown.append((rel, resize(image).numpy()))
        view.samples[name] = shown
    return view


def augmented_views(file: str | Path, channels: int, size: tuple[int, int], im: ImageSpec, n: int = 6,
                    seed: int = 0) -> list[np.ndarray]:
    """``n`` draws of the run's train transform on one image file (uint8 (C, H, W) each); raises
    ValueError with the reason when the file does not decode."""
    image = decode(file, channels)
    if isinstance(image, str):
        raise ValueError(f"{file}: {image}")
    transform = train_transform(im, size)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return [transform(image).numpy() for _ in range(n)]


def check_files(index: ImageIndex, channels: int, stop: Callable[[], bool] | None = None,
                progress: Callable[[int, int], None] | None = None) -> list[tuple[str, str]]:
    """Decode every file of ``index``: the (file, reason) of each that cannot be read, as the run would
    skip it. ``stop`` is asked between files (True ends the check early with what was found);
    ``progress(done, total)`` is called every 200 files."""
    bad: list[tuple[str, str]] = []
    total = len(index)
    for i in range(total):
        if stop is not None and stop():
            break
        image = decode(index.path(i), channels)
        if isinstance(image, str):
            bad.append((index.files[i].decode(errors="replace"), image))
        if progress is not None and (i + 1) % 200 == 0:
            progress(i + 1, total)
    return bad


__all__ = ["ImagePreview", "augmented_views", "check_files", "preview_images"]
