"""Image files read whole into memory as one uint8 (N, C, H, W) array: the ``memory`` source of
``data.images`` (image folders and image CSVs for previews, predictions and version 1 specs)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..raw import DataError


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
