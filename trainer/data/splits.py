"""Splits of a dataset as float32 tensors: split by the seed, normalised with train-split statistics.

Imported on first use by :mod:`trainer.data` (it imports torch; the format registry does not).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from .raw import DataError, RawData

if TYPE_CHECKING:
    from .images.files import FileSplit


@dataclass
class Split:
    """One split: samples (normalised float32, or raw uint8 when streamed) and int64 labels."""

    x: torch.Tensor
    y: torch.Tensor

    def __len__(self) -> int:
        return int(self.y.shape[0])

    def samples(self, count: int) -> torch.Tensor:
        """The first ``count`` samples as held (normalised floats, or raw when streamed)."""
        return self.x[:count]


@dataclass
class Splits:
    """The three splits in memory (:class:`Split`), or as files decoded per batch (``FileSplit``, whose
    ``image_shape`` is what the loaders make of every file)."""

    train: Split | FileSplit
    val: Split | FileSplit
    test: Split | FileSplit
    classes: list[str]
    mean: torch.Tensor  # per channel (images) or per feature (tabular), from the train split (0..255 for images)
    std: torch.Tensor
    image_shape: tuple[int, int, int] | None = None   # set for files: (C, H, W) of every batch

    @property
    def on_disk(self) -> bool:
        return self.image_shape is not None

    @property
    def sample_shape(self) -> tuple[int, ...]:
        if self.image_shape is not None:
            return self.image_shape
        return tuple(int(d) for d in self.samples("train").shape[1:])

    @property
    def is_image(self) -> bool:
        return self.image_shape is not None or self.samples("train").dim() == 4

    def samples(self, name: str) -> torch.Tensor:
        """A memory split's samples (``train``, ``val`` or ``test``); a split of files has none in memory."""
        return self.memory_split(name).x

    def memory_split(self, name: str) -> Split:
        """The split ``name`` held in memory; TypeError for a split of files (read by the file loaders)."""
        split = getattr(self, name)
        if not isinstance(split, Split):
            raise TypeError(f"the {name} split is read from files, not held in memory")
        return split


def split_indices(n: int, val_fraction: float, test_fraction: float, seed: int,
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Deterministic train/val/test indices: the same seed always gives the same split."""
    perm = np.random.default_rng(seed).permutation(n)
    n_test, n_val = round(n * test_fraction), round(n * val_fraction)
    return perm[n_test + n_val:], perm[n_test:n_test + n_val], perm[:n_test]


def split_rows(raw: RawData, val_fraction: float, test_fraction: float, seed: int,
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of ``raw.x`` in the train, val and test splits; a split the source defines itself takes no
    rows (its fraction is 0)."""
    return split_indices(len(raw.y), 0.0 if raw.x_val is not None else val_fraction,
                         0.0 if raw.x_test is not None else test_fraction, seed)


def prepare(raw: RawData, *, val_fraction: float, test_fraction: float, seed: int,
            normalize: bool = True, keep_raw: bool = False) -> Splits:
    """Split, then normalise every split with statistics of the train split only.

    A source with its own test or validation split keeps it; the other splits come out of the rest by
    the fractions (:func:`split_rows`). ``keep_raw`` leaves the samples unnormalised (uint8 stays uint8)
    for streaming, where the loader normalises each batch on the device.
    """
    tr, va, te = split_rows(raw, val_fraction, test_fraction, seed)
    own = raw.own_splits()
    parts = [(raw.x[tr], raw.y[tr]),
             own["val"] if "val" in own else (raw.x[va], raw.y[va]),
             own["test"] if "test" in own else (raw.x[te], raw.y[te])]
    if len(parts[0][1]) == 0:
        raise DataError("the train split is empty: the dataset is too small for these fractions")
    mean, std = _stats(parts[0][0], normalize)
    splits: list[Split] = []
    for x, y in parts:
        xt = torch.from_numpy(np.ascontiguousarray(x))
        if not keep_raw:
            xt = normalise(xt, mean, std)
        splits.append(Split(xt, torch.from_numpy(np.ascontiguousarray(y))))
    train, val, test = splits
    return Splits(train, val, test, classes=list(raw.classes), mean=mean, std=std)


def _stats(x: np.ndarray, normalize: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and std over every axis but the channel/feature axis (axis 1)."""
    channels = x.shape[1]
    if not normalize:
        return torch.zeros(channels), torch.ones(channels)
    axes = tuple(i for i in range(x.ndim) if i != 1)
    xf = x.astype(np.float64)
    mean, std = xf.mean(axis=axes), xf.std(axis=axes)
    std = np.where(std < 1e-6, 1.0, std)
    return torch.tensor(mean, dtype=torch.float32), torch.tensor(std, dtype=torch.float32)


def normalise(x: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """(x - mean) / std with the statistics broadcast over the channel/feature axis."""
    shape = (1, -1) + (1,) * (x.dim() - 2)
    mean, std = mean.to(x.device).view(shape), std.to(x.device).view(shape)
    return (x.float() - mean) / std
