"""Datasets for training: read (any format), split by the seed, normalise with train-split statistics.

``load_raw`` reads a dataset through the format registry (:mod:`.formats`, one reader per format in
:mod:`.readers`) and checks it (:mod:`.sanity`); ``prepare`` gives :class:`Splits` of float32 tensors
on the host (:mod:`.splits`); :mod:`trainer.data.loaders` puts them on the device when they fit the
budget (batches are index gathers) or streams them through a ``DataLoader`` otherwise. Reading and
the registry import no torch (the run spec derives its format names from the registry); the
splits, which do, are imported when first asked for.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from .formats import (
    DIGITS,
    DataError,
    RawData,
    dataset_format,
    detect_format,
    fit_to_input,
    format_names,
    read_dataset,
)

if TYPE_CHECKING:
    from .splits import Split, Splits, normalise, prepare, split_indices, split_rows

__all__ = ["DIGITS", "DataError", "RawData", "Split", "Splits", "dataset_format", "detect_format", "fit_to_input",
           "format_names", "load_raw", "normalise", "prepare", "split_indices", "split_rows"]

_SPLITS = {"Split", "Splits", "normalise", "prepare", "split_indices", "split_rows"}


def __getattr__(name: str) -> Any:
    if name in _SPLITS:
        from . import splits

        return getattr(splits, name)
    raise AttributeError(f"module 'trainer.data' has no attribute '{name}'")


def load_raw(dataset: str, fmt: str, base: Path | None = None, *, target: str = "",
             image_size: list[int] | None = None) -> RawData:
    """Read the named dataset: ``digits`` (embedded) or a path to a file or folder."""
    if dataset == "digits" or fmt == "digits":
        return read_dataset("digits", None)
    path = Path(dataset).expanduser()
    if not path.is_absolute() and base is not None:
        path = base / path
    if not path.exists():
        raise DataError(f"{path}: no such file or folder")
    return read_dataset(fmt, path, target=target, image_size=image_size)
