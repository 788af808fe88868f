"""Element-wise arithmetic and joins: Add, Multiply, Concat, Subtract, Divide and AddConstant."""

from __future__ import annotations

from ..catalog import Params, ParamSpec, PortSpec, Shape, fmt_shape, layer
from ..errors import ShapeError
from ._rules import norm_dim

CAT = "Merge"
_MANY = (PortSpec("in", variadic=True, min_count=2, doc="two or more tensors"),)


def _broadcast(xs: list[Shape], what: str) -> Shape:
    rank = max(len(x) for x in xs)
    out = []
    for i in range(rank):
        sizes = {x[i - rank + len(x)] for x in xs if i - rank + len(x) >= 0} - {1}
        if len(sizes) > 1:
            shapes = ", ".join(fmt_shape(x) for x in xs)
            raise ShapeError(f"cannot {what} shapes {shapes}: they differ in dim {i} and do not broadcast")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


@layer("Add", CAT, "Element-wise sum (residual connections); shapes broadcast.", inputs=_MANY, prefix="add")
def add(p: Params, xs: list[Shape]) -> Shape:
    return _broadcast(xs, "add")


@layer("Multiply", CAT, "Element-wise product (gating, squeeze-excite); shapes broadcast.", inputs=_MANY,
       prefix="mul")
def multiply(p: Params, xs: list[Shape]) -> Shape:
    return _broadcast(xs, "multiply")


@layer("Concat", CAT, "Joins tensors along a dimension (channels by default).", [
    ParamSpec("dim", "int", 1, "Dimension to join along (batch is 0)."),
], inputs=_MANY, prefix="cat", key_params=("dim",))
def concat(p: Params, xs: list[Shape]) -> Shape:
    ranks = {len(x) for x in xs}
    if len(ranks) > 1:
        raise ShapeError(f"inputs differ in rank: {', '.join(fmt_shape(x) for x in xs)}")
    d = norm_dim(p["dim"], len(xs[0]))
    if d == 0:
        raise ShapeError("cannot concatenate along the batch dimension")
    for x in xs[1:]:
        if any(a != b for i, (a, b) in enumerate(zip(x, xs[0], strict=True)) if i != d):
            raise ShapeError(f"inputs must match except in dim {d}: {', '.join(fmt_shape(x) for x in xs)}")
    return (*xs[0][:d], sum(x[d] for x in xs), *xs[0][d + 1:])


@layer("Subtract", CAT, "Element-wise difference in - other (PoolFormer's pool(x) - x); shapes broadcast.", inputs=(
    PortSpec("in", doc="the tensor subtracted from"), PortSpec("other", doc="the tensor subtracted")),
    prefix="sub")
def subtract(p: Params, xs: list[Shape]) -> Shape:
    return _broadcast(xs, "subtract")


@layer("Divide", CAT, "Element-wise quotient in / other (linear attention's normaliser, EfficientViT's "
       "out / (sum + eps)); shapes broadcast.", inputs=(
    PortSpec("in", doc="the dividend"), PortSpec("other", doc="the divisor")), prefix="div")
def divide(p: Params, xs: list[Shape]) -> Shape:
    return _broadcast(xs, "divide")


@layer("AddConstant", CAT, "Adds a fixed number, nothing learned: x + value (x - 1 adds -1); or subtracts "
       "the input from it, value - x.", [
           ParamSpec("value", "float", 1.0, "The number added to every element."),
           ParamSpec("subtract_input", "bool", False, "Compute value - x instead (1 - x, as written)."),
       ], prefix="add_const", display="Add Constant", key_params=("value", "subtract_input"))
def add_constant(p: Params, xs: list[Shape]) -> Shape:
    return xs[0]


@layer("Stack", CAT, "Stacks tensors of one shape along a new dimension (torch.stack).", [
    ParamSpec("dim", "int", 1, "Where the new dimension goes (batch is 0)."),
], inputs=_MANY, prefix="stack", key_params=("dim",))
def stack(p: Params, xs: list[Shape]) -> Shape:
    if len({tuple(x) for x in xs}) > 1:
        raise ShapeError(f"inputs must have one shape: {', '.join(fmt_shape(x) for x in xs)}")
    d = norm_dim(p["dim"], len(xs[0]) + 1)
    if d == 0:
        raise ShapeError("cannot stack along the batch dimension", field="dim")
    return (*xs[0][:d], len(xs), *xs[0][d:])
