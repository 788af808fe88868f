"""A split of an image index: the files of one split, their labels, and how evaluation sees them.

Its own module (no loader, no splits import), so :class:`trainer.data.Splits` can name it."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import torch

from .decode import decode
from .transforms import Transform


@dataclass
class FileSplit:
    """One split of an image index: file paths (bytes, relative to ``root``) and int64 labels."""

    root: str
    files: np.ndarray
    y: torch.Tensor
    channels: int
    size: tuple[int, int]
    eval_transform: Transform
    rows: np.ndarray        # each file's row in the dataset (in its own split folder, when it has one)

    def __len__(self) -> int:
        return int(self.y.shape[0])

    def path(self, i: int) -> str:
        return os.path.join(self.root, os.fsdecode(self.files[i]))

    def samples(self, count: int) -> torch.Tensor:
        """The first ``count`` decodable samples as evaluation sees them (uint8), for export proofs."""
        out: list[torch.Tensor] = []
        for i in range(len(self)):
            image = decode(self.path(i), self.channels)
            if not isinstance(image, str):
                out.append(self.eval_transform(image))
            if len(out) == count:
                break
        return torch.stack(out) if out else torch.zeros(0, self.channels, *self.size, dtype=torch.uint8)
