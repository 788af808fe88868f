"""Image folders: one subfolder per class (torchvision's ImageFolder layout), optionally split ahead of
time into ``train/``, ``val/`` and ``test/``."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..formats import IMAGE_SUFFIXES, DataError, RawData, ReadOptions, dataset_format
from ..images.index import split_folders



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


def load_images(files: list[tuple[str, int, Path]], image_size: tuple[int, int] | None,
            ) -> tuple[np.ndarray, np.ndarray]:
    """Every file as uint8 (C, H, W) in one size and one mode (grey when every image is), and the labels."""
    import warnings

    from PIL import Image, UnidentifiedImageError

    opened = []
    for _, _, f in files:
        try:
            with warnings.catch_warnings():
                # Pillow warns above MAX_IMAGE_PIXELS / 2 and refuses above it (a decompression bomb: a
                # small file that expands to gigabytes); a dataset image that large is refused here.
                warnings.simplefilter("error", Image.DecompressionBombWarning)
                with Image.open(f) as im:
                    im.load()
                    opened.append(im.copy())
        except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
            raise DataError(f"{f}: refused, an image this large is likely a decompression bomb ({exc})") from None
        except (OSError, UnidentifiedImageError, ValueError, SyntaxError) as exc:  # Pillow raises all of these
            raise DataError(f"{f}: not a readable image ({exc})") from None
    mode = "L" if all(im.mode in ("L", "1", "I;16") for im in opened) else "RGB"
    size: tuple[int, int] | None = (image_size[1], image_size[0]) if image_size else None
    images: list[np.ndarray] = []
    for image in opened:
        img = image.convert(mode)
        size = size or img.size
        arr = np.asarray(img.resize(size) if img.size != size else img, dtype=np.uint8)
        images.append(arr[None] if arr.ndim == 2 else arr.transpose(2, 0, 1))
    return np.stack(images), np.array([c for _, c, _ in files], dtype=np.int64)
