"""Image datasets indexed, not loaded: every file's path and label, nothing decoded.

Two layouts: a folder with one subfolder per class (optionally split ahead of time into ``train/``,
``val/`` and ``test/`` folders of them, as :mod:`trainer.data.readers.image_folder` reads), and a CSV
of ``path,label`` rows (the common Kaggle form; paths relative to the CSV's folder). The paths are
kept as one NumPy array of bytes, not a list of Python strings: DataLoader workers get a copy of the
index, and 60,000 ``str`` objects (with their reference counts touched on every read, so copied page by
page after a fork) would cost each of them several times the bytes.
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..formats import IMAGE_SUFFIXES
from ..raw import DataError

SPLIT_FOLDERS = {"train": ("train", "training"), "val": ("val", "valid", "validation"), "test": ("test", "testing")}
SPLIT_CODES = {"train": 0, "val": 1, "test": 2}
PATH_COLUMNS = ("path", "file", "filename", "image", "image_path")
LABEL_COLUMNS = ("label", "class", "target", "category")


@dataclass
class ImageIndex:
    """Where every image is (``root`` / ``files[i]``), its class, and the split its source puts it in."""

    root: str
    files: np.ndarray              # bytes paths relative to ``root`` (``np.bytes_``), one per image
    labels: np.ndarray             # int64 class index per image
    classes: list[str]
    split_of: np.ndarray | None = None     # int8 SPLIT_CODES per image, when the source splits ahead of time
    empty_classes: list[str] = field(default_factory=list)   # class folders holding no image

    def __len__(self) -> int:
        return len(self.labels)

    def path(self, i: int) -> str:
        return os.path.join(self.root, os.fsdecode(self.files[i]))

    def own_splits(self) -> set[str]:
        """The splits the source defines itself ("val", "test")."""
        if self.split_of is None:
            return set()
        present = set(np.unique(self.split_of).tolist())
        return {name for name, code in SPLIT_CODES.items() if code in present and name != "train"}


def is_image_csv(path: Path) -> bool:
    """A ``.csv`` whose header names a path column and a label column."""
    if path.suffix.lower() != ".csv" or not path.is_file():
        return False
    try:
        with path.open(encoding="utf-8", newline="") as f:
            header = next(csv.reader(f), [])
    except (OSError, UnicodeDecodeError, csv.Error):
        return False
    names = [h.strip().lower() for h in header]
    return any(n in PATH_COLUMNS for n in names) and any(n in LABEL_COLUMNS for n in names)


def index_images(path: Path) -> ImageIndex:
    """Index an image folder or an image CSV; a DataError names what is wrong and where."""
    if path.is_file():
        return index_csv(path)
    return index_folder(path)


def split_folders(path: Path) -> dict[str, Path] | None:
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


def index_folder(path: Path) -> ImageIndex:
    splits = split_folders(path)
    roots = splits if splits is not None else {"train": path}
    found = {split: sorted(p for p in root.iterdir() if p.is_dir()) for split, root in roots.items()}
    classes = sorted({d.name for dirs in found.values() for d in dirs})
    if not classes:
        raise DataError(f"{path}: no class subfolders (one folder of images per class)")
    code = {name: i for i, name in enumerate(classes)}
    files: list[bytes] = []
    labels: list[int] = []
    split_of: list[int] = []
    counts = dict.fromkeys(classes, 0)
    for split, dirs in found.items():
        for d in dirs:
            # One relpath per folder, not per file: at 60,000 files relpath was 2/3 of the index's time.
            prefix = os.fsencode(os.path.join(os.path.relpath(d, path), ""))
            names = [os.fsencode(e.name) for e in sorted(os.scandir(d), key=lambda e: e.name)
                     if e.is_file() and os.path.splitext(e.name)[1].lower() in IMAGE_SUFFIXES]
            files += [prefix + name for name in names]
            labels += [code[d.name]] * len(names)
            split_of += [SPLIT_CODES[split]] * len(names)
            counts[d.name] += len(names)
    if not files:
        raise DataError(f"{path}: no images found in class subfolders ({', '.join(IMAGE_SUFFIXES)})")
    empty = [name for name, n in counts.items() if n == 0]
    return ImageIndex(str(path), np.array(files, dtype=np.bytes_), np.array(labels, dtype=np.int64), classes,
                      np.array(split_of, dtype=np.int8) if splits is not None else None, empty)


def index_csv(path: Path) -> ImageIndex:
    """``path,label`` rows (named columns, any order); labels are class names, sorted."""
    try:
        with path.open(encoding="utf-8", newline="") as f:
            rows = list(csv.reader(f))
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except csv.Error as exc:
        raise DataError(f"{path}: not a readable CSV ({exc})") from None
    header = [h.strip().lower() for h in rows[0]] if rows else []
    p_col = next((header.index(n) for n in PATH_COLUMNS if n in header), None)
    l_col = next((header.index(n) for n in LABEL_COLUMNS if n in header), None)
    if p_col is None or l_col is None:
        raise DataError(f"{path}: line 1 must name a path column ({', '.join(PATH_COLUMNS)}) and a label column "
                        f"({', '.join(LABEL_COLUMNS)})")
    paths, names = [], []
    for line, row in enumerate(rows[1:], start=2):
        if not row:
            continue
        if len(row) <= max(p_col, l_col) or not row[p_col].strip() or not row[l_col].strip():
            raise DataError(f"{path}: line {line}: needs a path and a label")
        paths.append(row[p_col].strip())
        names.append(row[l_col].strip())
    if not paths:
        raise DataError(f"{path}: no rows of images")
    root = path.parent
    missing = next((p for p in paths if not (root / p).is_file()), None)
    if missing is not None:
        raise DataError(f"{path}: line {paths.index(missing) + 2}: no such image file '{missing}'")
    classes = sorted(set(names))
    code = {name: i for i, name in enumerate(classes)}
    return ImageIndex(str(root), np.array([os.fsencode(p) for p in paths], dtype=np.bytes_),
                      np.array([code[n] for n in names], dtype=np.int64), classes)


__all__ = ["SPLIT_FOLDERS", "ImageIndex", "index_csv", "index_folder", "index_images", "is_image_csv"]
