"""Readers for every dataset format: each returns :class:`RawData` (NumPy arrays, nothing downloaded).

Images come out as ``(N, C, H, W)`` (uint8 or float), tabular data as ``(N, F)`` float32, labels as
int64 class indices. Nothing here runs code from a file: ``.npz`` is read with ``allow_pickle=False``
and CIFAR's python batches through an unpickler that only admits NumPy's array reconstruction.
"""

from __future__ import annotations

import csv
import gzip
import io
import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np

DIGITS = Path(__file__).resolve().parents[2] / "assets" / "data" / "digits.npz"
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff")


class DataError(ValueError):
    """A dataset that cannot be read; the message names the file and what is wrong."""


@dataclass
class RawData:
    """A whole dataset in host memory; ``x_test``/``y_test`` and ``x_val``/``y_val`` when the source
    defines its own test or validation split (``x``/``y`` are then the rest)."""

    x: np.ndarray
    y: np.ndarray
    classes: list[str]
    x_test: np.ndarray | None = None
    y_test: np.ndarray | None = None
    x_val: np.ndarray | None = None
    y_val: np.ndarray | None = None

    def own_splits(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """The validation and test splits the source defines itself, by name ("val", "test")."""
        pairs = {"val": (self.x_val, self.y_val), "test": (self.x_test, self.y_test)}
        return {name: (x, y) for name, (x, y) in pairs.items() if x is not None and y is not None}

    @property
    def sample_shape(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self.x.shape[1:])


def detect_format(path: Path) -> str:
    """Guess the format of a dataset path from what is in it."""
    if path.is_file():
        name = path.name.lower()
        if name.endswith(".npz"):
            return "npz"
        if name.endswith((".csv", ".csv.gz")):
            return "csv"
        raise DataError(f"{path}: cannot tell the format of this file (expected .npz or .csv)")
    names = {p.name for p in path.iterdir()}
    if "dataset_info.json" in names or "dataset_dict.json" in names:
        return "hf"
    if {"data_batch_1", "test_batch"} <= names or {"train", "test", "meta"} <= names:
        return "cifar"
    if any("idx3-ubyte" in n for n in names):
        return "idx"
    if any(p.is_dir() for p in path.iterdir()):
        return "image_folder"
    raise DataError(f"{path}: no dataset found in this folder")


def read_dataset(fmt: str, path: Path | None, *, target: str = "", image_size: list[int] | None = None) -> RawData:
    """Read a dataset of the given format (``auto`` detects it)."""
    if fmt == "digits" or path is None:
        return read_npz(DIGITS)
    if fmt == "auto":
        fmt = detect_format(path)
    readers = {"npz": lambda: read_npz(path), "csv": lambda: read_csv(path, target),
               "image_folder": lambda: read_image_folder(path, image_size), "idx": lambda: read_idx(path),
               "cifar": lambda: read_cifar(path), "hf": lambda: read_hf(path, target)}
    return readers[fmt]()


# ---------------------------------------------------------------------------- npz
_X_KEYS = ("x", "images", "data", "features", "X")
_Y_KEYS = ("y", "labels", "targets", "target", "Y")


def read_npz(path: Path) -> RawData:
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (OSError, ValueError) as exc:
        raise DataError(f"{path}: not a readable .npz file ({exc})") from None
    xk = next((k for k in _X_KEYS if k in arrays), None)
    yk = next((k for k in _Y_KEYS if k in arrays), None)
    if xk is None or yk is None:
        raise DataError(f"{path}: needs an array of samples ({'/'.join(_X_KEYS)}) and of labels "
                        f"({'/'.join(_Y_KEYS)}); found {', '.join(arrays) or 'nothing'}")
    x, y = _samples(arrays[xk], path), arrays[yk]
    xt, yt = arrays.get(f"{xk}_test"), arrays.get(f"{yk}_test")
    names = arrays.get("classes", arrays.get("class_names"))
    classes = [str(c) for c in names] if names is not None else []
    y, classes = _labels(y, classes, path)
    if xt is not None and yt is not None:
        yt, _ = _labels(yt, classes, path)
        return RawData(x, y, classes, _samples(xt, path), yt)
    return RawData(x, y, classes)


def _samples(x: np.ndarray, where: Path) -> np.ndarray:
    """Images to (N, C, H, W): (N, H, W) gains a channel, (N, H, W, C) with C in 1/3/4 is transposed."""
    if x.dtype.kind not in "uif" or x.ndim < 2:
        raise DataError(f"{where}: samples must be a numeric array of at least 2 dimensions, got {x.dtype} "
                        f"{x.shape}")
    if x.ndim == 3:
        x = x[:, None]
    elif x.ndim == 4 and x.shape[-1] in (1, 3, 4) and x.shape[1] not in (1, 3, 4):
        x = x.transpose(0, 3, 1, 2)
    if x.dtype.kind == "f" and not np.isfinite(x).all():
        raise DataError(f"{where}: samples contain NaN or infinite values")
    return np.ascontiguousarray(x if x.dtype == np.uint8 else x.astype(np.float32))


def _labels(y: np.ndarray, classes: list[str], where: Path) -> tuple[np.ndarray, list[str]]:
    if y.ndim != 1 or y.dtype.kind not in "iu":
        raise DataError(f"{where}: labels must be a 1-D array of integer class indices, got {y.dtype} {y.shape}")
    if y.size and y.min() < 0:
        raise DataError(f"{where}: labels must not be negative (found {int(y.min())})")
    count = max(len(classes), int(y.max()) + 1 if y.size else 0)
    return y.astype(np.int64), classes or [str(i) for i in range(count)]


# ---------------------------------------------------------------------------- csv
def read_csv(path: Path, target: str = "") -> RawData:
    """Numeric columns as they are; other columns one-hot; ``target`` (default: last column) the class."""
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", newline="") as f:
        rows = [r for r in csv.reader(f) if r]
    if len(rows) < 2:
        raise DataError(f"{path}: needs a header row and at least one data row")
    header, body = rows[0], rows[1:]
    for i, r in enumerate(body, start=2):
        if len(r) != len(header):
            raise DataError(f"{path}: row {i} has {len(r)} values, the header has {len(header)}")
    target = target or header[-1]
    if target not in header:
        raise DataError(f"{path}: no target column '{target}' (columns: {', '.join(header)})")
    t = header.index(target)
    columns = [_column(header[j], [r[j].strip() for r in body], path) for j in range(len(header)) if j != t]
    if not columns:
        raise DataError(f"{path}: no feature columns besides the target '{target}'")
    values = [r[t].strip() for r in body]
    classes = _sorted_names(set(values))
    index = {c: i for i, c in enumerate(classes)}
    y = np.array([index[v] for v in values], dtype=np.int64)
    return RawData(np.concatenate(columns, axis=1).astype(np.float32), y, classes)


def _column(name: str, values: list[str], path: Path) -> np.ndarray:
    try:
        return np.array([float(v) for v in values], dtype=np.float32)[:, None]
    except ValueError:
        pass
    if any(v == "" for v in values) and all(_is_number(v) for v in values if v):
        row = values.index("") + 2
        raise DataError(f"{path}: column '{name}' is numeric but row {row} is empty")
    cats = _sorted_names(set(values))
    index = {c: i for i, c in enumerate(cats)}
    onehot = np.zeros((len(values), len(cats)), dtype=np.float32)
    onehot[np.arange(len(values)), [index[v] for v in values]] = 1.0
    return onehot


def _is_number(v: str) -> bool:
    try:
        float(v)
    except ValueError:
        return False
    return True


def _sorted_names(names: set[str]) -> list[str]:
    return sorted(names, key=lambda s: (0, float(s), s) if _is_number(s) else (1, 0.0, s))


# -------------------------------------------------------------------- image folder
SPLIT_FOLDERS = {"train": ("train", "training"), "val": ("val", "valid", "validation"), "test": ("test", "testing")}


def read_image_folder(path: Path, image_size: list[int] | None = None) -> RawData:
    """One subfolder per class, every image resized to ``image_size`` (default: the first image's).

    A folder split ahead of time (``train/``, and ``val/`` or ``valid/``, ``test/``, each with the class
    subfolders: the layout of torchvision's ImageFolder datasets and most downloads) keeps its splits:
    the classes are the union of every split's, and a split without some class simply has none of it."""
    splits = _split_folders(path)
    if splits is None:
        files, classes = _class_files({"": path}, path)
        x, y = _images(files, image_size)
        return RawData(x, y, classes)
    files, classes = _class_files(splits, path)
    x, y = _images(files, image_size)
    split_of = np.array([split for split, _, _ in files])
    parts = {name: (x[split_of == name], y[split_of == name]) for name in splits}
    if len(parts["train"][1]) == 0:
        raise DataError(f"{splits['train']}: no images found in class subfolders ({', '.join(IMAGE_SUFFIXES)})")
    test, val = parts.get("test", (None, None)), parts.get("val", (None, None))
    return RawData(*parts["train"], classes, *test, *val)


def _split_folders(path: Path) -> dict[str, Path] | None:
    """``{"train": ..., "val": ..., "test": ...}`` when ``path`` is split ahead of time, else None: a
    train folder, and every subfolder a split name holding class folders (so a dataset whose classes
    happen to be called "train" and "test" is still read as classes)."""
    subdirs = [p for p in path.iterdir() if p.is_dir()]
    named = {split: d for d in subdirs for split, names in SPLIT_FOLDERS.items() if d.name.lower() in names}
    if "train" not in named or len(named) != len(subdirs):
        return None
    if not all(any(c.is_dir() for c in d.iterdir()) for d in named.values()):
        return None
    return {split: named[split] for split in SPLIT_FOLDERS if split in named}   # train first: its size rules


def _class_files(roots: dict[str, Path], path: Path) -> tuple[list[tuple[str, int, Path]], list[str]]:
    """(split, class index, file) of every image under the class subfolders of each root; the classes
    sorted by name over all roots."""
    found = {split: sorted(p for p in root.iterdir() if p.is_dir()) for split, root in roots.items()}
    classes = sorted({d.name for dirs in found.values() for d in dirs})
    index = {name: i for i, name in enumerate(classes)}
    files = [(split, index[d.name], f) for split, dirs in found.items() for d in dirs for f in sorted(d.iterdir())
             if f.suffix.lower() in IMAGE_SUFFIXES]
    if not files:
        raise DataError(f"{path}: no images found in class subfolders ({', '.join(IMAGE_SUFFIXES)})")
    return files, classes


def _images(files: list[tuple[str, int, Path]], image_size: list[int] | None) -> tuple[np.ndarray, np.ndarray]:
    """Every file as uint8 (C, H, W) in one size and one mode (grey when every image is), and the labels."""
    from PIL import Image, UnidentifiedImageError

    opened = []
    for _, _, f in files:
        try:
            with Image.open(f) as im:
                im.load()
                opened.append(im.copy())
        except (OSError, UnidentifiedImageError) as exc:
            raise DataError(f"{f}: not a readable image ({exc})") from None
    mode = "L" if all(im.mode in ("L", "1", "I;16") for im in opened) else "RGB"
    size: tuple[int, int] | None = (image_size[1], image_size[0]) if image_size else None
    images: list[np.ndarray] = []
    for im in opened:
        im = im.convert(mode)
        size = size or im.size
        arr = np.asarray(im.resize(size) if im.size != size else im, dtype=np.uint8)
        images.append(arr[None] if arr.ndim == 2 else arr.transpose(2, 0, 1))
    return np.stack(images), np.array([c for _, c, _ in files], dtype=np.int64)


# ---------------------------------------------------------------------------- idx
def read_idx(path: Path) -> RawData:
    """MNIST / Fashion-MNIST: ``train-images-idx3-ubyte`` etc., optionally gzipped, in ``path``."""
    def find(kind: str) -> Path:
        hits = sorted(p for p in path.rglob(f"*{kind}*") if p.is_file())
        if not hits:
            raise DataError(f"{path}: no file matching '*{kind}*' (MNIST IDX layout)")
        return hits[0]

    x = _idx_array(find("train-images-idx3"))[:, None]
    y = _idx_array(find("train-labels-idx1")).astype(np.int64)
    xt = _idx_array(find("t10k-images-idx3"))[:, None]
    yt = _idx_array(find("t10k-labels-idx1")).astype(np.int64)
    if len(x) != len(y) or len(xt) != len(yt):
        raise DataError(f"{path}: image and label files hold different counts")
    return RawData(x, y, [str(i) for i in range(int(max(y.max(), yt.max())) + 1)], xt, yt)


def _idx_array(path: Path) -> np.ndarray:
    raw = path.read_bytes()
    if path.suffix == ".gz":
        raw = gzip.decompress(raw)
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise DataError(f"{path}: not an unsigned-byte IDX file")
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    offset = 4 + 4 * ndim
    if len(raw) - offset != int(np.prod(dims)):
        raise DataError(f"{path}: holds {len(raw) - offset} bytes of data, the header says {dims}")
    return np.frombuffer(raw, dtype=np.uint8, offset=offset).reshape(dims)


# -------------------------------------------------------------------------- cifar
class _ArraysOnly(pickle.Unpickler):
    """Admits NumPy's array reconstruction and nothing else: a CIFAR batch cannot run code.

    (``_codecs.encode`` is how protocol-2 pickles written by Python 3 carry bytes; it only encodes text.)
    """

    _ALLOWED = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
                ("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode")}

    def find_class(self, module: str, name: str) -> object:
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(f"refusing to load '{module}.{name}' from a data file")
        return super().find_class(module, name)


def _unpickle(path: Path) -> dict:
    try:
        obj = _ArraysOnly(io.BytesIO(path.read_bytes()), encoding="bytes").load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError) as exc:
        raise DataError(f"{path}: not a CIFAR python batch ({exc})") from None
    if not isinstance(obj, dict):
        raise DataError(f"{path}: not a CIFAR python batch (no dictionary inside)")
    return {k.decode() if isinstance(k, bytes) else k: v for k, v in obj.items()}


def read_cifar(path: Path) -> RawData:
    """CIFAR-10 (``data_batch_1..5``, ``test_batch``) or CIFAR-100 (``train``, ``test``) python batches."""
    if (path / "data_batch_1").exists():
        train = [_unpickle(p) for p in sorted(path.glob("data_batch_*"))]
        test, meta, key, names = _unpickle(path / "test_batch"), path / "batches.meta", "labels", "label_names"
    else:
        train, test = [_unpickle(path / "train")], _unpickle(path / "test")
        meta, key, names = path / "meta", "fine_labels", "fine_label_names"

    def arrays(batches: list[dict]) -> tuple[np.ndarray, np.ndarray]:
        try:
            x = np.concatenate([np.asarray(b["data"], dtype=np.uint8) for b in batches])
            y = np.concatenate([np.asarray(b[key], dtype=np.int64) for b in batches])
        except KeyError as exc:
            raise DataError(f"{path}: a batch has no '{exc.args[0]}' entry") from None
        return x.reshape(-1, 3, 32, 32), y

    x, y = arrays(train)
    xt, yt = arrays([test])
    count = int(max(y.max(), yt.max())) + 1
    classes = [str(i) for i in range(count)]
    if meta.exists():
        listed = _unpickle(meta).get(names, [])
        if len(listed) == count:
            classes = [n.decode() if isinstance(n, bytes) else str(n) for n in listed]
    return RawData(x, y, classes, xt, yt)


# ------------------------------------------------------------- hugging face datasets
def read_hf(path: Path, target: str = "") -> RawData:
    """A dataset saved with ``save_to_disk``: an image column (``image``/``img``) or numeric columns."""
    try:
        import datasets
    except ImportError:
        raise DataError(f"{path}: reading a Hugging Face dataset needs the 'datasets' package "
                        "(pip install 'torch-studio[hf]')") from None
    ds = datasets.load_from_disk(str(path))
    if isinstance(ds, datasets.DatasetDict):
        train, test = ds.get("train", next(iter(ds.values()))), ds.get("test")
    else:
        train, test = ds, None
    label = target or next((c for c in ("label", "labels", "target") if c in train.column_names), "")
    if label not in train.column_names:
        raise DataError(f"{path}: no label column '{label or 'label'}' (columns: {', '.join(train.column_names)})")
    feature = train.features[label]
    names = list(getattr(feature, "names", None) or [])
    x, y = _hf_arrays(train, label, path)
    y, classes = _labels(y, names, path)
    if test is not None:
        xt, yt = _hf_arrays(test, label, path)
        return RawData(x, y, classes, xt, _labels(yt, classes, path)[0])
    return RawData(x, y, classes)


def _hf_arrays(ds: object, label: str, path: Path) -> tuple[np.ndarray, np.ndarray]:
    cols = [c for c in ds.column_names if c != label]  # type: ignore[attr-defined]
    image_col = next((c for c in ("image", "img", "pixel_values") if c in cols), None)
    y = np.asarray(ds[label], dtype=np.int64)  # type: ignore[index]
    if image_col:
        x = np.stack([np.asarray(im) for im in ds[image_col]])  # type: ignore[index]
        return _samples(x.astype(np.uint8) if x.dtype.kind in "iu" else x, path), y
    table = np.stack([np.asarray(ds[c], dtype=np.float32) for c in cols], axis=1)  # type: ignore[index]
    return table, y
