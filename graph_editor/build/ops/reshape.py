"""Layers that only rearrange: Flatten, Reshape, Permute, SelectToken.

``x.view(...)``, ``x.permute(...)``, ``x.transpose(...)`` and ``x[:, i]`` in traced code need the
traced shapes, so the importer maps those calls itself; the rules here cover the modules.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import fx, nn

from .. import layers as L
from ..analysis import zero_flops
from ..import_rules import Mapped, attributes, const, function_rule, module_rule, tensor
from ..modules import Call, Example, Params, Shape, builder

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
    return Call(L.Reshape, (list(p["shape"]),))


@module_rule(L.Reshape)
def _import_reshape(m: L.Reshape, xs: list[fx.Node]) -> Mapped:
    return Mapped("Reshape", {"shape": list(m.shape)}, xs)


# ------------------------------------------------------------------ Permute
@builder("Permute", example=Example((3, 4, 5), {"dims": [2, 0, 1]}))
def _permute(p: Params, xs: list[Shape]) -> Call:
    return Call(L.Permute, (list(p["dims"]),))


@module_rule(L.Permute)
def _import_permute(m: L.Permute, xs: list[fx.Node]) -> Mapped:
    return Mapped("Permute", {"dims": list(m.dims)}, xs)


# ------------------------------------------------------------------ SelectToken
@builder("SelectToken", example=Example((5, 8), {"index": 2}))
def _select(p: Params, xs: list[Shape]) -> Call:
    return Call(L.SelectToken, (p["index"],))


module_rule(L.SelectToken)(attributes("SelectToken", "index"))
