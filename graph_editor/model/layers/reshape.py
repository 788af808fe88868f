"""Layers that only rearrange: Flatten, Reshape, Permute, SelectToken."""

from __future__ import annotations

from ..catalog import ParamSpec, fmt_shape, layer
from ..errors import ShapeError
from ._rules import norm_dim, prod

CAT = "Shape"


@layer("Flatten", CAT, "Flattens dimensions start_dim..end_dim into one (batch is dim 0).", [
    ParamSpec("start_dim", "int", 1, "First dimension to flatten."),
    ParamSpec("end_dim", "int", -1, "Last dimension to flatten."),
], prefix="flatten")
def flatten(p, xs):
    (x,) = xs
    start = norm_dim(p["start_dim"], len(x), "start_dim")
    end = norm_dim(p["end_dim"], len(x), "end_dim")
    if start > end:
        raise ShapeError(f"start_dim {p['start_dim']} comes after end_dim {p['end_dim']}")
    return (*x[:start], prod(x[start:end + 1]), *x[end + 1:])


@layer("Reshape", CAT, "Reshapes each sample (batch kept); one dimension may be -1.", [
    ParamSpec("shape", "ints", [-1], "Per-sample shape, e.g. 16,5,5.", minimum=-1),
], prefix="reshape", key_params=("shape",))
def reshape(p, xs):
    (x,) = xs
    shape = list(p["shape"])
    total = prod(x[1:])
    if shape.count(-1) > 1:
        raise ShapeError("only one dimension of shape may be -1")
    if 0 in shape:
        raise ShapeError("shape may not contain 0")
    known = prod(d for d in shape if d != -1)
    if -1 in shape:
        if total % known:
            raise ShapeError(f"cannot reshape {fmt_shape(x)} ({total} values) into {fmt_shape((0, *shape))}")
        shape[shape.index(-1)] = total // known
    elif known != total:
        raise ShapeError(f"cannot reshape {fmt_shape(x)} ({total} values) into {fmt_shape((0, *shape))} ({known})")
    return (x[0], *shape)


@layer("Permute", CAT, "Reorders the per-sample dimensions (0 is the first after the batch).", [
    ParamSpec("dims", "ints", [1, 0], "New order of the per-sample dimensions.", minimum=0),
], prefix="permute", key_params=("dims",))
def permute(p, xs):
    (x,) = xs
    dims = p["dims"]
    if sorted(dims) != list(range(len(x) - 1)):
        raise ShapeError(f"dims {dims} must order 0..{len(x) - 2}, the per-sample dims of {fmt_shape(x)}")
    return (x[0], *(x[1 + d] for d in dims))


@layer("SelectToken", CAT, "Takes one token of a sequence (e.g. the class token of a ViT).", [
    ParamSpec("index", "int", 0, "Token position."),
], prefix="token", key_params=("index",))
def select_token(p, xs):
    (x,) = xs
    if len(x) != 3:
        raise ShapeError(f"expects a sequence LxE, receives {fmt_shape(x)}")
    if not -x[1] <= p["index"] < x[1]:
        raise ShapeError(f"index {p['index']} is outside the {x[1]} tokens")
    return (x[0], x[2])
