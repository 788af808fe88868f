"""NumPy ``.npz`` archives, and the embedded digits (an ``.npz`` shipped with the studio)."""

from __future__ import annotations

import zipfile
import zlib
from pathlib import Path

import numpy as np

from ..arrays import labels, samples
from ..formats import DIGITS, DataError, RawData, ReadOptions, dataset_format

X_KEYS = ("x", "images", "data", "features", "X")
Y_KEYS = ("y", "labels", "targets", "target", "Y")


@dataset_format("digits")
def read_digits(path: Path, options: ReadOptions) -> RawData:
    """The 1,797 8x8 handwritten digits embedded in the studio (scikit-learn's digits)."""
    return read_npz(DIGITS, options)


def check_npz_bytes(path: Path) -> None:
    """Refuse a file that is no NumPy file at all by its first bytes: ``np.load`` takes anything that is
    neither a zip nor a .npy array for a pickle, and said "contains pickled (object) data" of a text file."""
    try:
        with open(path, "rb") as f:
            head = f.read(6)
    except OSError as exc:
        raise DataError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if not head.startswith((b"PK\x03\x04", b"PK\x05\x06", b"\x93NUMPY")):
        what = "it is empty" if not head else "its first bytes are neither a zip archive nor a NumPy array"
        raise DataError(f"{path}: not an .npz file (a zip of NumPy arrays): {what}")


@dataset_format("npz", detect=lambda p: p.is_file() and p.name.lower().endswith(".npz"))
def read_npz(path: Path, options: ReadOptions) -> RawData:
    """Arrays x/images/data/features and y/labels/targets, optionally x_test/y_test and classes."""
    check_npz_bytes(path)
    try:
        z = np.load(path, allow_pickle=False)
        if not isinstance(z, np.lib.npyio.NpzFile):
            raise DataError(f"{path}: holds a single array, not an .npz archive of samples and labels")
        with z:
            arrays = {k: z[k] for k in z.files}
    except DataError:
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error, KeyError) as exc:
        raise DataError(f"{path}: not a readable .npz file ({type(exc).__name__}: {exc or 'empty'})") from None
    xk = next((k for k in X_KEYS if k in arrays), None)
    yk = next((k for k in Y_KEYS if k in arrays), None)
    if xk is None or yk is None:
        raise DataError(f"{path}: needs an array of samples ({'/'.join(X_KEYS)}) and of labels "
                        f"({'/'.join(Y_KEYS)}); found {', '.join(arrays) or 'nothing'}")
    names = arrays.get("classes", arrays.get("class_names"))
    classes = [str(c) for c in names.reshape(-1)] if names is not None else []
    y, classes = labels(arrays[yk], classes, path, yk)
    xt, yt = arrays.get(f"{xk}_test"), arrays.get(f"{yk}_test")
    if (xt is None) != (yt is None):
        raise DataError(f"{path}: has {f'{xk}_test' if yt is None else f'{yk}_test'} but not "
                        f"{f'{yk}_test' if yt is None else f'{xk}_test'}")
    if xt is not None and yt is not None:
        # Unnamed classes are those the training labels number; a test label beyond them is refused.
        yt, _ = labels(yt, classes, path, f"{yk}_test")
        return RawData(samples(arrays[xk], path), y, classes, samples(xt, path), yt)
    return RawData(samples(arrays[xk], path), y, classes)
