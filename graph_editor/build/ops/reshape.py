"""Layers that only rearrange: Flatten, Reshape, Permute, SelectToken.

``x.view(...)``, ``x.permute(...)``, ``x.transpose(...)`` and ``x[:, i]`` in traced code need the
traced shapes, so the importer maps those calls itself; the rules here cover the modules.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import fx, nn

from ..analysis import zero_flops
from ..import_rules import Mapped, attributes, const, function_rule, module_rule, tensor
from ..modules import Call, Example, Params, Shape, builder


# ------------------------------------------------------------------ modules of our own
# Plain nn.Module classes: a built network, its state_dict and its exported model.py (which copies
# their source) read like hand-written PyTorch.
class Reshape(nn.Module):
    """Reshape each sample; the batch dimension is kept."""

    def __init__(self, shape: list[int]) -> None:
        super().__init__()
        self.shape = tuple(shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(x.shape[0], *self.shape)

    def extra_repr(self) -> str:
        return f"shape={self.shape}"


class Permute(nn.Module):
    """Reorder the per-sample dimensions (0 is the first after the batch)."""

    def __init__(self, dims: list[int]) -> None:
        super().__init__()
        self.dims = tuple(dims)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.permute(0, *(d + 1 for d in self.dims))

    def extra_repr(self) -> str:
        return f"dims={self.dims}"


class SelectToken(nn.Module):
    def __init__(self, index: int = 0) -> None:
        super().__init__()
        self.index = index

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[:, self.index]

    def extra_repr(self) -> str:
        return f"index={self.index}"

zero_flops("Flatten", "Reshape", "Permute", "SelectToken")


# ------------------------------------------------------------------ Flatten
@builder("Flatten", example=Example((3, 4, 4), {"start_dim": 2}))
def _flatten(p: Params, xs: list[Shape]) -> Call:
    return Call(nn.Flatten, (p["start_dim"], p["end_dim"]))


module_rule(nn.Flatten)(attributes("Flatten", "start_dim", "end_dim"))


@function_rule(torch.flatten, methods=("flatten",))
def _f_flatten(input: Any, start_dim: int = 0, end_dim: int = -1) -> Mapped:
    return Mapped("Flatten", {"start_dim": const(start_dim, "start_dim"), "end_dim": const(end_dim, "end_dim")},
                  [tensor(input)])


# ------------------------------------------------------------------ Reshape
@builder("Reshape", example=Example((3, 4, 4), {"shape": [4, -1]}))
def _reshape(p: Params, xs: list[Shape]) -> Call:
    return Call(Reshape, (list(p["shape"]),))


@module_rule(Reshape)
def _import_reshape(m: Reshape, xs: list[fx.Node]) -> Mapped:
    return Mapped("Reshape", {"shape": list(m.shape)}, xs)


# ------------------------------------------------------------------ Permute
@builder("Permute", example=Example((3, 4, 5), {"dims": [2, 0, 1]}))
def _permute(p: Params, xs: list[Shape]) -> Call:
    return Call(Permute, (list(p["dims"]),))


@module_rule(Permute)
def _import_permute(m: Permute, xs: list[fx.Node]) -> Mapped:
    return Mapped("Permute", {"dims": list(m.dims)}, xs)


# ------------------------------------------------------------------ SelectToken
@builder("SelectToken", example=Example((5, 8), {"index": 2}))
def _select(p: Params, xs: list[Shape]) -> Call:
    return Call(SelectToken, (p["index"],))


module_rule(SelectToken)(attributes("SelectToken", "index"))
