"""Reductions over chosen dimensions: Mean, Sum, Amax (``x.mean((2, 3))`` pooling, token means)."""

from __future__ import annotations

from ..catalog import Params, ParamSpec, Shape, fmt_shape, layer
from ..errors import ShapeError

CAT = "Pooling"


def reduced_dims(dims: list[int], x: tuple[int, ...]) -> list[int]:
    """``dims`` (batch is 0, negative counts from the end) as sorted non-negative dims of ``x``;
    the batch dimension and repeats are refused, naming the field."""
    rank = len(x)
    out: list[int] = []
    for d in dims:
        if not -rank <= d < rank:
            raise ShapeError(f"cannot reduce dim {d} of {fmt_shape(x, batch=True)}: out of range for a "
                             f"{rank}-D tensor (batch is dim 0)", field="dims")
        d %= rank
        if d == 0:
            raise ShapeError(f"cannot reduce dims {dims}: dim {dims[len(out)]} is the batch dimension of "
                             f"{fmt_shape(x, batch=True)}; only per-sample dims may be reduced", field="dims")
        if d in out:
            raise ShapeError(f"cannot reduce dims {dims}: dim {d} is named twice", field="dims")
        out.append(d)
    return sorted(out)


def _reduce(p: Params, xs: list[Shape]) -> Shape:
    (x,) = xs
    dims = reduced_dims(p["dims"], x)
    if p["keepdim"]:
        return tuple(1 if i in dims else s for i, s in enumerate(x))
    return tuple(s for i, s in enumerate(x) if i not in dims)


for _type, _doc in [
    ("Mean", "Mean over the chosen dims (global average pooling: dims 2,3; token mean: dim 1)."),
    ("Sum", "Sum over the chosen dims."),
    ("Amax", "Maximum over the chosen dims (global max pooling: dims 2,3)."),
]:
    layer(_type, CAT, _doc, [
        ParamSpec("dims", "ints", [2, 3], "Dimensions to reduce (batch is 0, which may not be reduced; "
                                          "negative counts from the end)."),
        ParamSpec("keepdim", "bool", False, "Keep each reduced dimension with size 1."),
    ], prefix=_type.lower(), key_params=("dims",))(_reduce)
