"""What ``torch-studio predict`` reads: image files, folders of them, or dataset files (.npz, .csv), each
sample as the dataset file holds it (raw values; images as their pixels), shaped as the model takes it.

Every problem is an :class:`InputError` naming the file and what is wrong with it.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from trainer.data.formats import IMAGE_SUFFIXES

TABLE_SUFFIXES = (".csv", ".csv.gz")


class InputError(ValueError):
    """An input that cannot be predicted: the message names the file and what is wrong."""


def read_inputs(paths: list[str], input_shape: tuple[int, ...]) -> tuple[list[str], np.ndarray]:
    """(names, samples) of every input in order: a folder gives its image files (sorted, subfolders
    included), a dataset file each of its samples (``file.npz[3]``)."""
    names: list[str] = []
    arrays: list[np.ndarray] = []
    for text in paths:
        path = Path(text).expanduser()
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
            if not files:
                raise InputError(f"{path}: the folder holds no image files ({', '.join(IMAGE_SUFFIXES)})")
            for f in files:
                names.append(str(f))
                arrays.append(read_image(f, input_shape)[None])
        elif not path.is_file():
            raise InputError(f"{path}: no such file or folder")
        elif path.suffix.lower() in IMAGE_SUFFIXES:
            names.append(str(path))
            arrays.append(read_image(path, input_shape)[None])
        elif path.suffix.lower() == ".npz" or path.name.lower().endswith(TABLE_SUFFIXES):
            x = read_npz(path) if path.suffix.lower() == ".npz" else read_table(path, input_shape)
            x = _fit(x, input_shape, path)
            names += [f"{path}[{i}]" for i in range(len(x))]
            arrays.append(x)
        else:
            raise InputError(f"{path}: not an image ({', '.join(IMAGE_SUFFIXES)}), a folder, an .npz or a .csv file")
    if not arrays:
        raise InputError("no inputs given")
    return names, np.concatenate(arrays).astype(np.float32, copy=False)


def read_image(path: Path, input_shape: tuple[int, ...]) -> np.ndarray:
    """An image file's pixels (0-255) as the model takes them: ``C x H x W`` resized to the model's size
    (as the image-folder reader resizes), or flattened for a flat input of ``side x side (x 3)`` values."""
    from PIL import Image, UnidentifiedImageError

    mode, size = _image_layout(path, input_shape)
    try:
        with Image.open(path) as im:
            img = im.convert(mode)
            if img.size != size:
                img = img.resize(size)
            arr = np.asarray(img, dtype=np.uint8)
    except (OSError, UnidentifiedImageError, ValueError, SyntaxError) as exc:
        raise InputError(f"{path}: not a readable image ({type(exc).__name__}: {exc})") from None
    arr = arr[None] if arr.ndim == 2 else arr.transpose(2, 0, 1)
    return arr.reshape(input_shape).astype(np.float32)


def _image_layout(path: Path, shape: tuple[int, ...]) -> tuple[str, tuple[int, int]]:
    modes = {1: "L", 3: "RGB", 4: "RGBA"}
    if len(shape) == 3 and shape[0] in modes:
        return modes[shape[0]], (shape[2], shape[1])
    if len(shape) == 1:
        for channels in (1, 3):
            side = math.isqrt(shape[0] // channels)
            if side * side * channels == shape[0]:
                return modes[channels], (side, side)
    raise InputError(f"{path}: the model takes samples of shape {tuple(shape)}, which is not an image "
                     "(C x H x W with 1, 3 or 4 channels, or a square image flattened)")


def read_npz(path: Path) -> np.ndarray:
    """The samples of an .npz dataset file (x/images/data/features; labels, if any, are not needed)."""
    from trainer.data import DataError
    from trainer.data.arrays import samples
    from trainer.data.readers.npz import X_KEYS, check_npz_bytes

    try:
        check_npz_bytes(path)
        with np.load(path, allow_pickle=False) as z:
            key = next((k for k in X_KEYS if k in z.files), None)
            if key is None:
                raise InputError(f"{path}: holds no array of samples ({'/'.join(X_KEYS)}); found "
                                 f"{', '.join(z.files) or 'nothing'}")
            x = z[key]
        return samples(x, path)
    except InputError:
        raise
    except DataError as exc:
        raise InputError(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - a damaged zip, a pickle, a single array: say which file
        raise InputError(f"{path}: not a readable .npz file ({type(exc).__name__}: {exc})") from None


def read_table(path: Path, input_shape: tuple[int, ...]) -> np.ndarray:
    """The feature columns of a CSV: all columns when there are as many as the model takes, else the
    columns besides the target (the last), read as the dataset reader reads them."""
    from trainer.data import DataError
    from trainer.data.readers.table import _column, _rows

    try:
        rows = _rows(path)
        if len(rows) < 2:
            raise InputError(f"{path}: needs a header row and at least one data row")
        header = [h.strip() for h in rows[0][1]]
        body = rows[1:]
        for line, r in body:
            if len(r) != len(header):
                raise InputError(f"{path}: line {line} has {len(r)} values, the header has {len(header)}")
        keep = range(len(header)) if len(input_shape) == 1 and len(header) == input_shape[0] \
            else range(len(header) - 1)
        lines = [line for line, _ in body]
        columns = [_column(header[j], [r[j].strip() for _, r in body], lines, path)[0] for j in keep]
    except DataError as exc:
        raise InputError(str(exc)) from None
    if not columns:
        raise InputError(f"{path}: no feature columns")
    return np.concatenate(columns, axis=1).astype(np.float32)


def _fit(x: np.ndarray, shape: tuple[int, ...], path: Path) -> np.ndarray:
    """Samples as the model takes them: images flattened for a flat input (as training fed them)."""
    if x.shape[1:] != tuple(shape) and len(shape) == 1 and x.ndim > 2:
        x = x.reshape(len(x), -1)
    if x.shape[1:] != tuple(shape):
        raise InputError(f"{path}: its samples have shape {tuple(x.shape[1:])}, the model takes {tuple(shape)}")
    if x.dtype != np.uint8 and not np.isfinite(x).all():
        row = int(np.argwhere(~np.isfinite(x.reshape(len(x), -1)))[0][0])
        raise InputError(f"{path}: sample {row} holds NaN or infinite values")
    return x
