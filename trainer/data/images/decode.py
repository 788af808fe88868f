"""One image file to a ``uint8`` (C, H, W) tensor in the channels the graph takes, or the reason it cannot be.

``torchvision.io.decode_image`` first (JPEG, PNG, GIF, WebP: libjpeg-turbo and libpng, no Python per
pixel); Pillow for what it does not read (BMP, TIFF). Whatever the file holds is converted: CMYK and
palette images to RGB, RGBA loses its alpha, grey is repeated to RGB for a colour graph (and colour
averaged to grey for a grey one), 16-bit samples keep their high byte. A corrupt or truncated file is
not an exception here: :func:`decode` returns the reason, and the loader skips and counts the file.
torchvision is imported at the first decode, not with this module (see :mod:`.transforms`).

On CUDA, :func:`decode_jpegs` decodes a batch of JPEG bytes on the GPU (nvJPEG), the other files on
the CPU.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from PIL import Image

if TYPE_CHECKING:
    from torchvision.io import ImageReadMode

JPEG_MAGIC = b"\xff\xd8\xff"


def read_bytes(path: str | Path) -> torch.Tensor:
    """The file's bytes as a 1-D uint8 tensor (empty for an empty file)."""
    data = Path(path).read_bytes()
    return torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else torch.empty(0, dtype=torch.uint8)


def decode(path: str | Path, channels: int) -> torch.Tensor | str:
    """The image at ``path`` as uint8 (``channels``, H, W), or a one-line reason it cannot be read."""
    try:
        data = read_bytes(path)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    return decode_bytes(data, channels, path)


def decode_bytes(data: torch.Tensor, channels: int, path: str | Path = "") -> torch.Tensor | str:
    """Encoded bytes to uint8 (``channels``, H, W), or the reason they are not an image."""
    if data.numel() == 0:
        return "empty file"
    from torchvision.io import decode_image

    try:
        return to_uint8(decode_image(data, mode=read_mode(channels)))
    except RuntimeError:
        pass   # a format torchvision does not read (BMP, TIFF), or a damaged file: Pillow decides which
    return _decode_pil(data, channels)


def read_mode(channels: int) -> ImageReadMode:
    """torchvision's read mode for a graph of ``channels`` (1: grey, 3: RGB)."""
    from torchvision.io import ImageReadMode

    return {1: ImageReadMode.GRAY, 3: ImageReadMode.RGB}[channels]


def to_uint8(image: torch.Tensor) -> torch.Tensor:
    """8-bit samples: a 16-bit PNG keeps its high byte (what Pillow and libpng's strip_16 give)."""
    if image.dtype == torch.uint8:
        return image
    return (image.to(torch.int32) >> 8).to(torch.uint8)


def _decode_pil(data: torch.Tensor, channels: int) -> torch.Tensor | str:
    import io

    from PIL import UnidentifiedImageError

    try:
        with warnings.catch_warnings():
            # A decompression bomb (a small file that expands to gigabytes) is refused, not decoded.
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data.numpy().tobytes())) as im:
                im.load()
                arr = _pil_array(im, channels)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        return "refused: an image this large is likely a decompression bomb"
    except UnidentifiedImageError:
        return "not an image (an unknown or damaged format)"
    except (OSError, ValueError, SyntaxError, EOFError) as exc:  # Pillow raises all of these
        return f"not a readable image ({str(exc)[:120]})"
    out = torch.from_numpy(np.array(arr, copy=True))   # Pillow's buffer is read-only
    return out[None] if out.dim() == 2 else out.permute(2, 0, 1).contiguous()


def _pil_array(im: Image.Image, channels: int) -> np.ndarray:
    if im.mode in ("I;16", "I;16B", "I;16L", "I"):     # 16/32-bit grey: keep the high byte of 16 bits
        grey = (np.asarray(im, dtype=np.int64) >> 8).clip(0, 255).astype(np.uint8)
        return grey if channels == 1 else np.repeat(grey[..., None], 3, axis=2)
    return np.asarray(im.convert("L" if channels == 1 else "RGB"), dtype=np.uint8)


def is_jpeg(data: torch.Tensor) -> bool:
    return data.numel() >= 3 and bytes(data[:3].tolist()) == JPEG_MAGIC


def decode_jpegs(encoded: list[torch.Tensor], channels: int, device: torch.device | str,
                 ) -> list[torch.Tensor | str]:
    """A batch of encoded images decoded on ``device``: the JPEGs in one ``decode_jpeg`` call (nvJPEG on
    CUDA), the rest (and any JPEG the batched call refuses) one by one on the CPU, then moved."""
    from torchvision.io import decode_jpeg

    out: list[torch.Tensor | str] = [""] * len(encoded)
    jpegs = [i for i, data in enumerate(encoded) if is_jpeg(data)]
    if jpegs:
        try:
            decoded = decode_jpeg([encoded[i] for i in jpegs], mode=read_mode(channels), device=device)
            for i, image in zip(jpegs, decoded, strict=True):
                out[i] = image
        except RuntimeError:
            jpegs = []   # one damaged JPEG fails the whole call: decode each alone below
    done = set(jpegs)
    for i, data in enumerate(encoded):
        if i not in done:
            image = decode_bytes(data, channels)
            out[i] = image if isinstance(image, str) else image.to(device)
    return out
