"""The dataset-format registry: each format is one ``@dataset_format(name, detect=...)`` reader.

A reader turns a path into :class:`RawData` (NumPy arrays, nothing downloaded): images as
``(N, C, H, W)`` (uint8 or float32), tabular data as ``(N, F)`` float32, labels as int64 class
indices. :func:`read_dataset` then checks what every format must satisfy (:mod:`.sanity`), so a
reader only says what is wrong with its own file. The readers live in :mod:`trainer.data.readers`,
one file per format; ``spec.FORMATS`` is derived from this registry. Nothing here imports torch.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from graph_editor.model.registry import Registry

from .raw import DataError, RawData

DIGITS = Path(__file__).resolve().parents[2] / "assets" / "data" / "digits.npz"
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff")


@dataclass(frozen=True)
class ReadOptions:
    """What a spec may say about how to read: the CSV/HF target column, the image folder's size."""

    target: str = ""
    image_size: tuple[int, int] | None = None


Reader = Callable[[Path, ReadOptions], RawData]
Detector = Callable[[Path], bool]


@dataclass(frozen=True)
class DatasetFormat:
    name: str
    read: Reader
    detect: Detector | None  # None: never detected, only named (the embedded digits)
    doc: str
    fallback: bool = False   # detected only when no other format claims the path


_FORMATS: Registry[str, DatasetFormat] = Registry("a dataset format")


def dataset_format(name: str, *, detect: Detector | None = None, fallback: bool = False,
                   ) -> Callable[[Reader], Reader]:
    """Register ``read(path, options) -> RawData`` as the format ``name``; a second ``name`` is refused.

    ``detect(path)`` says whether a file or folder is in this format; ``auto`` asks every format in
    the order they register, then the ``fallback`` ones (any folder of folders is an image folder)."""
    def deco(read: Reader) -> Reader:
        if name == "auto":
            raise ValueError("dataset format 'auto' is taken: it means every registered format, in turn")
        _FORMATS.add(name, DatasetFormat(name, read, detect, (read.__doc__ or "").strip().split("\n")[0], fallback))
        return read
    return deco


def formats() -> dict[str, DatasetFormat]:
    _ensure_loaded()
    return dict(_FORMATS.items())


def format_names() -> tuple[str, ...]:
    """What ``data.format`` may say: ``auto`` and every registered format."""
    return ("auto", *formats())


def detect_format(path: Path) -> str:
    """Guess the format of a dataset path from what is in it."""
    if not path.is_file() and not path.is_dir():
        raise DataError(f"{path}: neither a file nor a folder")
    for fmt in sorted(formats().values(), key=lambda f: f.fallback):  # stable: registration order kept
        if fmt.detect is not None and fmt.detect(path):
            return fmt.name
    if path.is_file():
        raise DataError(f"{path}: cannot tell the format of this file (expected .npz or .csv)")
    raise DataError(f"{path}: no dataset found in this folder")


def read_dataset(fmt: str, path: Path | None, *, target: str = "", image_size: list[int] | None = None) -> RawData:
    """Read a dataset of the given format (``auto`` detects it) and check it (:func:`.sanity.check_raw`)."""
    from .sanity import check_raw

    if fmt == "digits" or path is None:
        fmt, path = "digits", DIGITS
    if fmt == "auto":
        fmt = detect_format(path)
    known = formats()
    if fmt not in known:
        raise DataError(f"unknown dataset format '{fmt}' (choose {', '.join(format_names())})")
    options = ReadOptions(target, (int(image_size[0]), int(image_size[1])) if image_size else None)
    try:
        raw = known[fmt].read(path, options)
    except MemoryError:
        raise DataError(f"{path}: does not fit in memory") from None
    except (ValueError, TypeError, KeyError, IndexError, EOFError, zlib.error) as exc:
        if isinstance(exc, DataError):
            raise
        # What a reader did not foresee in a malformed file is still a refusal naming file and format.
        raise DataError(f"{path}: cannot be read as {fmt} ({type(exc).__name__}: {str(exc)[:200]})") from None
    check_raw(raw, path)
    return raw


def fit_to_input(raw: RawData, input_shape: tuple[int, ...]) -> RawData:
    """The data as a graph whose per-sample input is ``input_shape`` takes it: images flattened to
    rows of features for a flat input (an MLP of 64 features takes the 8x8 digits); else unchanged.

    Decided once, where a run's data feeding is decided (:func:`trainer.checks.setup`), and by
    anything that re-evaluates a run's model on its data."""
    if len(input_shape) == 1 and len(raw.sample_shape) > 1:
        return raw.flattened()
    return raw


_loaded = False


def _ensure_loaded() -> None:
    global _loaded  # a once-only flag, as the layer catalog's
    if not _loaded:
        _loaded = True
        from . import readers  # noqa: F401  (importing the package registers the built-in formats)
