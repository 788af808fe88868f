"""Networks written the way people write them (tutorials, papers' repositories), for the import tests:
sizes read in Python, tuple outputs, optional arguments, ``.cuda()`` in a factory."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class LenView(nn.Module):
    """``x.view(len(x), -1)``: the batch read as a Python int."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8 * 4 * 4, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)
        return self.fc(x.view(len(x), -1))


class Ratio(nn.Module):
    """``int(x.size(1) * r)``: a width computed from a size, and control flow on sizes."""

    def __init__(self, ratio: float = 0.5) -> None:
        super().__init__()
        self.ratio = ratio
        self.fc = nn.Linear(6, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.size(1) != 12:
            x = F.pad(x, (0, 12 - x.size(1)))
        keep = int(x.size(1) * self.ratio)
        return self.fc(torch.tanh(x[:, :keep]))


class AuxHead(nn.Module):
    """Returns ``(logits, aux_logits)`` like Inception and GoogLeNet in training code."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(12, 16), nn.ReLU())
        self.head = nn.Linear(16, 5)
        self.aux = nn.Linear(16, 5)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.body(x)
        return self.head(h), self.aux(h)


class LenViewAux(LenView):
    """``x.view(len(x), -1)`` and ``(logits, aux_logits)`` together: fx cannot trace it; its exported program
    maps to catalog layers, the first output the graph's."""

    def __init__(self) -> None:
        super().__init__()
        self.aux = nn.Linear(8 * 4 * 4, 10)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
        x = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2).view(len(x), -1)
        return self.fc(x), self.aux(x)


class LenViewCumsum(LenView):
    """``x.view(len(x), -1)`` (fx cannot trace it) and ``torch.cumsum`` (no catalog layer): the whole model is one
    program, with two outputs."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
        x = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2).view(len(x), -1)
        return self.fc(x.cumsum(1)), x


class CumsumBlock(nn.Module):
    """A running sum over the tokens: ``torch.cumsum`` has no catalog layer."""

    def __init__(self, dim: int = 8) -> None:
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.proj(x.cumsum(1))


class CumsumTokens(nn.Module):
    """A block inside a classifier: ``CumsumBlock`` kept whole, the rest catalog layers."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(4, 8)
        self.block = CumsumBlock(8)
        self.norm = nn.LayerNorm(8)
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.block(self.embed(x))).mean(1))


class MaskedBlock(nn.Module):
    """``forward(self, x, mask=None)``: an optional mask; attention by hand, ``q @ k.transpose``."""

    def __init__(self, dim: int = 8) -> None:
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        attn = (q @ k.transpose(-2, -1)) / q.size(-1) ** 0.5
        if mask is not None:
            attn = attn.masked_fill(mask == 0, float("-inf"))
        return x + self.proj(attn.softmax(-1) @ v)


class Tokens(nn.Module):
    """A block inside a classifier: ``MaskedBlock`` kept whole, the rest catalog layers."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(4, 8)
        self.block = MaskedBlock(8)
        self.norm = nn.LayerNorm(8)
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        x = self.block(self.embed(x), mask)
        return self.head(self.norm(x).mean(1))


def cuda_factory() -> nn.Module:
    """A factory written for a GPU machine."""
    return LenViewCumsum().cuda()
