"""Element-wise arithmetic and joins: Add, Multiply, Concat, Subtract, Divide and AddConstant."""

from __future__ import annotations

import operator
from typing import Any

import torch
from torch import fx, nn

from ...analysis.per_node import zero_flops
from ...importer.rules import (
    FunctionRule,
    Mapped,
    Unmappable,
    attributes,
    const,
    function_rule,
    graph_fold,
    module_rule,
    plain,
    tensor,
)
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


class Subtract(nn.Module):
    """Element-wise difference ``a - b``."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a - b


class Divide(nn.Module):
    """Element-wise quotient ``a / b``."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a / b


class AddConstant(nn.Module):
    """Adds a fixed number (``x + value``), or subtracts the input from it (``value - x``); nothing learned."""

    def __init__(self, value: float, subtract_input: bool = False) -> None:
        super().__init__()
        self.value, self.subtract_input = value, subtract_input

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.value - x if self.subtract_input else x + self.value

    def extra_repr(self) -> str:
        return f"value={self.value}, subtract_input={self.subtract_input}"


class Stack(nn.Module):
    def __init__(self, dim: int = 1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, *xs: torch.Tensor) -> torch.Tensor:
        return torch.stack(xs, dim=self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


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
        for x, value in ((input, number(other)), (other, number(input))):
            if value is not None and isinstance(x, fx.Node):
                if type_ == "Multiply":  # x * 0.5, 2 * x: a fixed factor is ScaleBy
                    return Mapped("ScaleBy", {"factor": value, "divide": False}, [x])
                return Mapped("AddConstant", {"value": value}, [x])  # x + 1, and sum()'s 0 + x
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


@function_rule(operator.pow, torch.pow, torch.square, methods=("pow", "square"))
def _f_square(input: Any, exponent: Any = 2, *, out: Any = None) -> Mapped:
    """``x ** 2`` (timm's StarReLU, ``relu(x) ** 2``) is ``x * x``: PyTorch computes a square so, bit for bit."""
    if number(exponent) != 2:
        raise Unmappable(f"a power with exponent {exponent!r}; only squares (x ** 2, as x * x) map")
    return Mapped("Multiply", {}, [tensor(input), tensor(input)])


# ------------------------------------------------------------------ Subtract, AddConstant
plain_builder("Subtract", Subtract, Example((3, 4, 4)))
plain_builder("Divide", Divide, Example((3, 4, 4)))
zero_flops("Subtract", "Divide", "AddConstant")  # element-wise
module_rule(Subtract)(plain("Subtract"))
module_rule(Divide)(plain("Divide"))  # a / b of two tensors: the rule is ops.core's division


@builder("AddConstant", example=Example((3, 4), {"value": -0.5, "subtract_input": True}))
def _add_constant(p: Params, xs: list[Shape]) -> Call:
    return Call(AddConstant, (float(p["value"]), bool(p["subtract_input"])))


module_rule(AddConstant)(attributes("AddConstant", "value", "subtract_input"))


@function_rule(operator.sub, operator.isub, torch.sub, torch.subtract, methods=("sub", "sub_", "subtract"))
def _f_subtract(input: Any, other: Any, *, alpha: Any = 1, out: Any = None) -> Mapped:
    if alpha != 1:
        raise Unmappable(f"subtract with alpha={alpha!r}")
    if (value := number(other)) is not None and isinstance(input, fx.Node):
        return Mapped("AddConstant", {"value": -value}, [input])  # x - c is x + (-c), exactly
    if (value := number(input)) is not None and isinstance(other, fx.Node):
        return Mapped("AddConstant", {"value": value, "subtract_input": True}, [other])
    return Mapped("Subtract", {}, [tensor(input), tensor(other, "second operand")])


@function_rule(torch.rsub)
def _f_rsub(input: Any, other: Any, *, alpha: Any = 1) -> Mapped:
    return _f_subtract(other, input, alpha=alpha)


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


# ------------------------------------------------------------------ Stack
@builder("Stack", example=Example((3, 4), {"dim": -1}))
def _stack(p: Params, xs: list[Shape]) -> Call:
    return Call(Stack, (p["dim"],))


zero_flops("Stack")
module_rule(Stack)(attributes("Stack", "dim"))


@function_rule(torch.stack)
def _f_stack(tensors: Any, dim: int = 0, *, out: Any = None) -> Mapped:
    if not isinstance(tensors, list | tuple):
        raise Unmappable("stack of a computed sequence")
    dim = const(dim, "dim")
    if dim == 0 or (dim < 0 and tensors and isinstance(tensors[0], fx.Node) and isinstance(
            value := tensors[0].meta.get("val"), torch.Tensor) and dim + value.dim() + 1 == 0):
        raise Unmappable("stacks along the batch dimension; only per-sample dimensions map")
    if len(tensors) == 1:  # torch.stack([x], dim) is x.unsqueeze(dim)
        return Mapped("Unsqueeze", {"dim": dim}, [tensor(tensors[0])])
    return Mapped("Stack", {"dim": dim}, [tensor(t) for t in tensors])


@graph_fold("sum of a stack")
def _fold_stack_reduce(gm: fx.GraphModule) -> None:
    """``torch.stack(xs).sum(0)`` (EfficientViM's heads) and ``.mean(0)`` (CrossViT's branches) as the sum of the
    parts (divided by their number): the batch dimension is never stacked into."""
    for n in list(gm.graph.nodes):
        parts = n.args[0] if n.target is torch.stack and n.args else None
        dim = n.args[1] if len(n.args) > 1 else n.kwargs.get("dim", 0)
        if not isinstance(parts, list | tuple) or len(parts) < 2 or dim != 0 or len(n.users) != 1:
            continue
        (user,) = n.users
        kind = _reduce_over_stack(user, n)
        if kind is None:
            continue
        with gm.graph.inserting_before(user):
            total = parts[0]
            for part in parts[1:]:
                total = gm.graph.call_function(operator.add, (total, part))
            if kind == "mean":
                total = gm.graph.call_function(operator.truediv, (total, len(parts)))
        user.replace_all_uses_with(total)
        gm.graph.erase_node(user)
        gm.graph.erase_node(n)
    gm.recompile()


def _reduce_over_stack(user: fx.Node, stack: fx.Node) -> str | None:
    """"sum" or "mean" where ``user`` reduces ``stack`` over its dim 0 only (no keepdim, no dtype), else None."""
    kind = {torch.sum: "sum", torch.mean: "mean", "sum": "sum", "mean": "mean"}.get(user.target)
    if kind is None or not user.args or user.args[0] is not stack or set(user.kwargs) - {"dim"}:
        return None
    dim = user.args[1] if len(user.args) > 1 else user.kwargs.get("dim")
    return kind if dim in (0, [0], (0,)) and len(user.args) <= 2 else None
