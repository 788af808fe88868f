"""Matrix product of two tensors: MatMul (``q @ k.transpose(-2, -1)``, ``attn @ v``: the attention core)."""

from __future__ import annotations

from ..catalog import Params, PortSpec, Shape, fmt_shape, layer
from ..errors import ShapeError

CAT = "Merge"


def broadcast_dims(a: tuple[int, ...], b: tuple[int, ...], what: str) -> tuple[int, ...]:
    """The broadcast of two size tuples (aligned at the right), or a ShapeError naming both."""
    rank = max(len(a), len(b))
    pa, pb = (1,) * (rank - len(a)) + tuple(a), (1,) * (rank - len(b)) + tuple(b)
    out = []
    for i, (x, y) in enumerate(zip(pa, pb, strict=True)):
        if x != y and 1 not in (x, y):
            raise ShapeError(f"{what} {fmt_shape(pa, batch=True)} and {fmt_shape(pb, batch=True)} differ in dim "
                             f"{i} ({x} vs {y}) and do not broadcast")
        out.append(y if x == 1 else x)
    return tuple(out)


@layer("MatMul", CAT, "Matrix product a @ b over the last two dims (q @ kᵀ, attn @ v); the dims before "
       "them (batch, heads) broadcast.", inputs=(
           PortSpec("in", doc="left operand a, [..., M, K]"), PortSpec("other", doc="right operand b, [..., K, N]")),
       prefix="matmul", display="Matrix Multiply")
def matmul(p: Params, xs: list[Shape]) -> Shape:
    a, b = xs
    for name, t in (("left operand", a), ("right operand", b)):
        if len(t) < 3:
            raise ShapeError(f"expects a matrix per sample as its {name} (at least 2-D after the batch), receives "
                             f"{fmt_shape(t) or 'a scalar'}")
    if a[-1] != b[-2]:
        raise ShapeError(f"the left operand has {a[-1]} columns, the right {b[-2]} rows: they must match "
                         f"(a {fmt_shape(a)}, b {fmt_shape(b)})")
    return (*broadcast_dims(a[:-2], b[:-2], "batch dims of"), a[-2], b[-1])
