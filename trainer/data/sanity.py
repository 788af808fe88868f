"""What every dataset must satisfy before a run starts, whatever its format.

Run by :func:`~trainer.data.formats.read_dataset` on what a reader returns, so a bad dataset is
refused with its file and the row, column or split at fault before a model, a run or a device
exists (it used to fail at step 1 with "Target 6 is out of bounds", after epoch 1, or never:
samples beyond the labels were silently left out).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .raw import DataError, RawData


def check_raw(raw: RawData, where: Path) -> None:
    """Refuse ``raw`` with one DataError naming the first thing wrong with it."""
    splits = {"": (raw.x, raw.y), "validation ": (raw.x_val, raw.y_val), "test ": (raw.x_test, raw.y_test)}
    for split, (x, y) in splits.items():
        if (x is None) != (y is None):
            raise DataError(f"{where}: the {split}split has {'samples but no labels' if y is None else 'labels but no samples'}")
        if x is None or y is None:
            continue
        if len(x) != len(y):
            raise DataError(f"{where}: {len(x)} {split}samples but {len(y)} {split}labels; each sample needs "
                            "exactly one label")
        if split and tuple(x.shape[1:]) != raw.sample_shape:
            raise DataError(f"{where}: {split}samples are {_shape(x.shape[1:])}, training samples "
                            f"{_shape(raw.sample_shape)}")
        _labels_in_range(y, raw.classes, where, split)
        _finite(x, where, split, raw.features)
    if len(raw.y) == 0:
        raise DataError(f"{where}: holds no training samples")
    _enough_classes(raw, where)


def _labels_in_range(y: np.ndarray, classes: list[str], where: Path, split: str) -> None:
    bad = np.flatnonzero((y < 0) | (y >= len(classes)))
    if bad.size:
        row = int(bad[0])
        names = ", ".join(classes[:6]) + (", ..." if len(classes) > 6 else "")
        raise DataError(f"{where}: {split}label {int(y[row])} at row {row} is not a class: there are "
                        f"{len(classes)} class names ({names}), so labels run 0 to {len(classes) - 1}")


def _enough_classes(raw: RawData, where: Path) -> None:
    if len(raw.classes) < 2:
        raise DataError(f"{where}: only one class ({raw.classes[0] if raw.classes else 'none'!r}); "
                        "a classifier needs at least two")
    present = np.unique(raw.y)
    if present.size < 2:
        raise DataError(f"{where}: every training sample is of the class {raw.classes[int(present[0])]!r}; "
                        "a classifier needs examples of at least two classes")


def _finite(x: np.ndarray, where: Path, split: str, features: list[str] | None) -> None:
    """NaN and infinities (including float64 values beyond float32's range, which became inf)."""
    if x.dtype.kind != "f":
        return
    finite = np.isfinite(x)
    if finite.all():
        return
    index = np.unravel_index(int(np.argmin(finite.reshape(-1))), x.shape)
    row, rest = int(index[0]), tuple(int(i) for i in index[1:])
    if x.ndim == 2:
        column = f"column '{features[rest[0]]}'" if features and rest[0] < len(features) else f"feature {rest[0]}"
        at = f"{column} of {split}row {row}"
    else:
        at = f"{split}sample {row} at {'x'.join(str(i) for i in rest)} (channel x row x column)"
    count = int(x.size - finite.sum())
    raise DataError(f"{where}: {x[index]} in {at} ({count} value(s) not finite in all; a value beyond "
                    "float32's range of 3.4e38 becomes inf): remove or fill them")


def _shape(shape: tuple[int, ...]) -> str:
    return "x".join(str(d) for d in shape) or "scalars"
