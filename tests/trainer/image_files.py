"""Image folders and CSVs written in a test's temp folder: real JPEG/PNG files, in any mode, and broken ones."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image


def class_image(rng: np.random.Generator, c: int, size: tuple[int, int] = (12, 14)) -> np.ndarray:
    """An RGB image whose class shows in which channel is bright (learnable in a few steps)."""
    a = rng.integers(0, 60, (*size, 3), dtype=np.uint8)
    a[..., c % 3] += 150
    return a


def write_folder(root: Path, classes: int = 3, per_class: int = 10, *, ext: str = ".jpg", seed: int = 0,
                 size: tuple[int, int] = (12, 14)) -> list[Path]:
    """``root/c<k>/<i><ext>``; the files written."""
    rng = np.random.default_rng(seed)
    files = []
    for c in range(classes):
        (root / f"c{c}").mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            f = root / f"c{c}" / f"{i:05d}{ext}"
            Image.fromarray(class_image(rng, c, size)).save(f, quality=90) if ext == ".jpg" else \
                Image.fromarray(class_image(rng, c, size)).save(f)
            files.append(f)
    return files


def corrupt(path: Path) -> Path:
    """A file named like an image holding no image."""
    path.write_bytes(b"\xff\xd8\xff\xe0 this JPEG stops here")
    return path
