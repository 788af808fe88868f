"""Modules whose forward needs the data's values; importable by name, as a Module node needs."""

from __future__ import annotations

import torch
from torch import nn


class PositiveCount(nn.Module):
    """Scales by how many values are positive, counted through a boolean mask: the mask's selection
    has a shape that depends on the values (``aten.nonzero`` underneath)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * x[x > 0].numel() / x.numel()


class ItemNet(nn.Module):
    """conv -> a scale by the batch's largest magnitude read with ``.item()`` -> linear."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.flat = nn.Flatten()
        self.fc = nn.Linear(4 * 8 * 8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        return self.fc(self.flat(y / (y.abs().max().item() + 1.0)))
