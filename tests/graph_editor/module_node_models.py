"""Modules with ops the catalog has no layer for; importable by name, as a Module node needs."""

from __future__ import annotations

import torch
from torch import nn


class SineBlock(nn.Module):
    """A conv whose output goes through ``torch.sin``: no catalog layer does that."""

    def __init__(self, channels: int, scale: float = 1.0) -> None:
        super().__init__()
        self.channels = channels
        self.scale = scale
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sin(self.conv(x)) * self.scale


class SineNet(nn.Module):
    def __init__(self, channels: int = 3, classes: int = 4) -> None:
        super().__init__()
        self.stem = nn.Conv2d(channels, 8, 3, padding=1)
        self.act = nn.ReLU()
        self.block = SineBlock(8, scale=0.5)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.head = nn.Linear(8, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.flatten(self.pool(self.block(self.act(self.stem(x))))))


class ItemScale(nn.Module):
    """Divides by the batch's largest magnitude read as a Python float: ``.item()`` breaks torch.compile's graph."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / (x.abs().max().item() + 1.0)


def sine_net() -> SineNet:
    torch.manual_seed(0)
    return SineNet()


def digits_sine_net() -> SineNet:
    """For the 8x8 one-channel digits with 10 classes, the worker's built-in dataset."""
    torch.manual_seed(0)
    return SineNet(channels=1, classes=10)


class RecurrentBlock(nn.Module):
    """A plain RNN over the tokens (no catalog layer; the catalog has LSTM and GRU), its output sequence only:
    the RNN returns (sequence, hidden state [layers, batch, features]), so the block is kept."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.features = features
        self.rnn = nn.RNN(features, features, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.rnn(x)[0]


class SequenceNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(6, 8)
        self.block = RecurrentBlock(8)
        self.flatten = nn.Flatten()
        self.head = nn.Linear(5 * 8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.flatten(self.block(self.embed(x))))


class WidthlessBlock(nn.Module):
    """Keeps no attribute for its width (like torchvision's ShiftedWindowAttention and ``dim``): only the
    layers built from it, so the importer finds the width among the weights' sizes."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return self.proj(torch.sin(q) * k + v)


class WidthlessNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(6, 8)
        self.block = WidthlessBlock(8, heads=2)
        self.flatten = nn.Flatten()
        self.head = nn.Linear(5 * 8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.flatten(self.block(self.embed(x))))


class TwoWidthsBlock(WidthlessBlock):
    """Three required arguments without attributes: more than the importer searches for."""

    def __init__(self, width: int, heads: int, depth: int, extra: int) -> None:
        super().__init__(width, heads)


class TwoOutBody(nn.Module):
    """Returns the features and the flattened input: a tuple no catalog layer makes (``torch.sin`` in it)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(12, 16)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        flat = x.flatten(1)
        return torch.sin(self.fc(flat)), flat


class AuxHead(nn.Module):
    """A body with two outputs, each read by its own head; returns (logits, aux_logits)."""

    def __init__(self) -> None:
        super().__init__()
        self.body = TwoOutBody()
        self.head = nn.Linear(16, 5)
        self.aux = nn.Linear(12, 5)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h, flat = self.body(x)
        return self.head(h), self.aux(flat)


class Positions(nn.Module):
    """Makes a tensor in forward on the input's device (``torch.arange(..., device=x.device)``): its
    program records the capture's device, and must run on meta (analysis) and elsewhere all the same."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # cumsum has no catalog layer: the model stays one program (the arange alone is a Constant node)
        return self.fc(x.cumsum(-1) + torch.arange(x.size(-1), device=x.device).float() / x.size(-1))
