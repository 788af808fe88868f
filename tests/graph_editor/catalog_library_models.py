"""Modules that call torchvision's and timm's stochastic-depth functions directly in forward, imported
at module level as user code does (fx keeps a call whole only where the name is a global of the
forward's module). Imported by test_catalog_layers only when its test runs: torchvision and timm take
seconds to import."""

from __future__ import annotations

import torch
from timm.layers import drop_path
from torch import nn
from torchvision.ops import stochastic_depth


class FunctionalDropPath(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2, self.head = nn.Linear(6, 6), nn.Linear(6, 6), nn.Linear(6, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + stochastic_depth(self.fc1(x), 0.2, "batch", self.training)
        x = x + drop_path(self.fc2(x), 0.1, self.training)
        return self.head(x)
