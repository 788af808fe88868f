"""The dataset types every part of :mod:`trainer.data` shares: :class:`RawData`, what a reader
returns, and :class:`DataError`. Their own module, so the checks (:mod:`.sanity`), the splits and the
array helpers use them without importing the format registry that runs those checks. Nothing here
imports torch, nor NumPy at run time."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


class DataError(ValueError):
    """A dataset that cannot be read; the message names the file and what is wrong."""


@dataclass
class RawData:
    """A whole dataset in host memory; ``x_test``/``y_test`` and ``x_val``/``y_val`` when the source
    defines its own test or validation split (``x``/``y`` are then the rest). ``features`` names the
    columns of tabular data (a one-hot column as ``colour=red``), so a problem can name its column."""

    x: np.ndarray
    y: np.ndarray
    classes: list[str]
    x_test: np.ndarray | None = None
    y_test: np.ndarray | None = None
    x_val: np.ndarray | None = None
    y_val: np.ndarray | None = None
    features: list[str] | None = None

    def own_splits(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """The validation and test splits the source defines itself, by name ("val", "test")."""
        pairs = {"val": (self.x_val, self.y_val), "test": (self.x_test, self.y_test)}
        return {name: (x, y) for name, (x, y) in pairs.items() if x is not None and y is not None}

    @property
    def sample_shape(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self.x.shape[1:])

    def flattened(self) -> RawData:
        """Every sample as one row of features (images for a flat input such as an MLP's)."""
        def flat(x: np.ndarray | None) -> np.ndarray | None:
            return None if x is None else x.reshape(len(x), -1)
        return replace(self, x=self.x.reshape(len(self.x), -1), x_test=flat(self.x_test), x_val=flat(self.x_val))
