"""Array helpers shared by the readers: samples to (N, C, H, W), labels to int64 class indices."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .raw import DataError


def samples(x: np.ndarray, where: Path) -> np.ndarray:
    """Images to (N, C, H, W): (N, H, W) gains a channel, (N, H, W, C) with C in 1/3/4 is transposed;
    anything not uint8 becomes float32 (whose finiteness :mod:`.sanity` checks)."""
    if x.dtype.kind not in "uif" or x.ndim < 2:
        raise DataError(f"{where}: samples must be a numeric array of at least 2 dimensions, got {x.dtype} "
                        f"{x.shape}")
    if x.ndim == 3:
        x = x[:, None]
    elif x.ndim == 4 and x.shape[-1] in (1, 3, 4) and x.shape[1] not in (1, 3, 4):
        x = x.transpose(0, 3, 1, 2)
    with np.errstate(over="ignore"):  # float64 beyond float32 becomes inf, and is reported by where
        return np.ascontiguousarray(x if x.dtype == np.uint8 else x.astype(np.float32))


def labels(y: np.ndarray, classes: list[str], where: Path, name: str = "labels") -> tuple[np.ndarray, list[str]]:
    """Integer class indices as int64, and the class names (``0..max`` when the source names none)."""
    if y.ndim != 1 or y.dtype.kind not in "iu":
        raise DataError(f"{where}: {name} must be a 1-D array of integer class indices, got {y.dtype} {y.shape}")
    if y.size and y.min() < 0:
        raise DataError(f"{where}: {name} must not be negative (found {int(y.min())} at row {int(y.argmin())})")
    count = max(len(classes), int(y.max()) + 1 if y.size else 0)
    return y.astype(np.int64), classes or [str(i) for i in range(count)]
