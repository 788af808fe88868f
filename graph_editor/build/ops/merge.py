"""Layers that join several inputs: Add, Multiply, Concat."""

from __future__ import annotations

import operator
from typing import Any

import torch
from torch import fx, nn

from ..analysis import zero_flops
from ..import_rules import FunctionRule, Mapped, Unmappable, const, function_rule, module_rule, plain, tensor
from ..modules import Call, Example, Params, Shape, builder, plain_builder
from .core import number


# ------------------------------------------------------------------ modules of our own
# Plain nn.Module classes: a built network, its state_dict and its exported model.py (which copies
# their source) read like hand-written PyTorch.
class Add(nn.Module):
    """Element-wise sum of all inputs (residual connections)."""

    def forward(self, *xs: torch.Tensor) -> torch.Tensor:
        out = xs[0]
        for x in xs[1:]:
            out = out + x
        return out


class Multiply(nn.Module):
    """Element-wise product of all inputs (gating)."""

    def forward(self, *xs: torch.Tensor) -> torch.Tensor:
        out = xs[0]
        for x in xs[1:]:
            out = out * x
        return out


class Concat(nn.Module):
    def __init__(self, dim: int = 1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, *xs: torch.Tensor) -> torch.Tensor:
        return torch.cat(xs, dim=self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


# ------------------------------------------------------------------ Add, Multiply
def _binary(type_: str) -> FunctionRule:
    def rule(input: Any, other: Any, *, alpha: Any = 1, out: Any = None) -> Mapped:
        if alpha != 1:
            raise Unmappable(f"{type_.lower()} with alpha={alpha!r}")
        if type_ == "Multiply":   # x * 0.5, 2 * x: a fixed factor is ScaleBy
            for x, factor in ((input, number(other)), (other, number(input))):
                if factor is not None and isinstance(x, fx.Node):
                    return Mapped("ScaleBy", {"factor": factor, "divide": False}, [tensor(x)])
        return Mapped(type_, {}, [tensor(input), tensor(other, "second operand")])
    return rule


for _type, _cls, _functions, _methods in [
    ("Add", Add, (operator.add, operator.iadd, torch.add), ("add", "add_")),
    ("Multiply", Multiply, (operator.mul, operator.imul, torch.mul), ("mul", "mul_")),
]:
    plain_builder(_type, _cls, Example((3, 4, 4)))
    zero_flops(_type)  # element-wise
    module_rule(_cls)(plain(_type))
    function_rule(*_functions, methods=_methods)(_binary(_type))


# ------------------------------------------------------------------ Concat
@builder("Concat", example=Example((3, 4, 4), {"dim": 1}))
def _concat(p: Params, xs: list[Shape]) -> Call:
    return Call(Concat, (p["dim"],))


zero_flops("Concat")


@module_rule(Concat)
def _import_concat(m: Concat, xs: list[fx.Node]) -> Mapped:
    return Mapped("Concat", {"dim": m.dim}, xs)


@function_rule(torch.cat, torch.concat, torch.concatenate)
def _f_cat(tensors: Any, dim: int = 0, *, out: Any = None) -> Mapped:
    if not isinstance(tensors, list | tuple):
        raise Unmappable("cat of a computed sequence")
    return Mapped("Concat", {"dim": const(dim, "dim")}, [tensor(t) for t in tensors])
