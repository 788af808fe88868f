"""Image folders: one subfolder per class (torchvision's ImageFolder layout), optionally split ahead of
time into ``train/``, ``val/`` and ``test/``."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..formats import IMAGE_SUFFIXES, DataError, RawData, ReadOptions, dataset_format
from ..images.index import split_folders
from ..images.whole import load_images


def _is_image_folder(path: Path) -> bool:
    return path.is_dir() and any(p.is_dir() for p in path.iterdir())


@dataset_format("image_folder", detect=_is_image_folder, fallback=True)
def read_image_folder(path: Path, options: ReadOptions) -> RawData:
    """One subfolder per class, every image resized to ``image_size`` (default: the first image's).

    A folder split ahead of time (``train/``, and ``val/`` or ``valid/``, ``test/``, each with the class
    subfolders: the layout of torchvision's ImageFolder datasets and most downloads) keeps its splits:
    the classes are the union of every split's, and a split without some class simply has none of it."""
    image_size = options.image_size
    splits = split_folders(path)
    if splits is None:
        files, classes = _class_files({"": path}, path)
        x, y = load_images(files, image_size)
        return RawData(x, y, classes)
    files, classes = _class_files(splits, path)
    x, y = load_images(files, image_size)
    split_of = np.array([split for split, _, _ in files])
    parts = {name: (x[split_of == name], y[split_of == name]) for name in splits}
    if len(parts["train"][1]) == 0:
        raise DataError(f"{splits['train']}: no images found in class subfolders ({', '.join(IMAGE_SUFFIXES)})")
    test, val = parts.get("test", (None, None)), parts.get("val", (None, None))
    return RawData(*parts["train"], classes, *test, *val)


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
