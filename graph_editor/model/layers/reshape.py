"""Layers that only rearrange: Flatten, Reshape, Permute, Transpose, Unsqueeze, Squeeze, Expand, Slice,
SelectToken.

None of them may touch the batch dimension (dim 0): a graph's batch flows through unchanged.
"""

from __future__ import annotations

from ..catalog import Params, ParamSpec, Shape, fmt_shape, layer
from ..errors import ShapeError
from ._rules import norm_dim, prod

CAT = "Shape"


@layer("Flatten", CAT, "Flattens dimensions start_dim..end_dim into one (batch is dim 0).", [
    ParamSpec("start_dim", "int", 1, "First dimension to flatten."),
    ParamSpec("end_dim", "int", -1, "Last dimension to flatten."),
], prefix="flatten")
def flatten(p: Params, xs: list[Shape]) -> Shape:
    (x,) = xs
    start = norm_dim(p["start_dim"], len(x), "start_dim")
    end = norm_dim(p["end_dim"], len(x), "end_dim")
    if start > end:
        raise ShapeError(f"start_dim {p['start_dim']} comes after end_dim {p['end_dim']}")
    return (*x[:start], prod(x[start:end + 1]), *x[end + 1:])


@layer("Reshape", CAT, "Reshapes each sample (batch kept); one dimension may be -1. With fold_batch, the "
       "leading dimension is computed from the whole tensor: windows or heads folded into the batch "
       "dimension (x.reshape(-1, 49, 96)) or unfolded back out of it.", [
    ParamSpec("shape", "ints", [-1], "Per-sample shape, e.g. 16,5,5.", minimum=-1),
    ParamSpec("fold_batch", "bool", False, "The leading dimension is what the whole tensor holds beyond shape, "
              "x.reshape(-1, *shape): each sample's values stay together, split into or joined from several "
              "leading rows (Swin's windows)."),
], prefix="reshape", key_params=("shape",))
def reshape(p: Params, xs: list[Shape]) -> Shape:
    (x,) = xs
    shape = list(p["shape"])
    if p["fold_batch"]:
        return _fold_batch(x, shape)
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


def _fold_batch(x: Shape, shape: list[int]) -> Shape:
    if any(d < 1 for d in shape):
        raise ShapeError("with fold_batch every dimension of shape is a size (no -1: the leading one is "
                         "computed)", field="shape")
    total, known = prod(x), prod(shape)
    if total % known:
        raise ShapeError(f"cannot fold {fmt_shape(x, True)} ({total} values, batch included) into rows of "
                         f"{fmt_shape((0, *shape))} ({known} values each)", field="shape")
    return (total // known, *shape)


@layer("Permute", CAT, "Reorders the per-sample dimensions (0 is the first after the batch).", [
    ParamSpec("dims", "ints", [1, 0], "New order of the per-sample dimensions.", minimum=0),
], prefix="permute", key_params=("dims",))
def permute(p: Params, xs: list[Shape]) -> Shape:
    (x,) = xs
    dims = p["dims"]
    if sorted(dims) != list(range(len(x) - 1)):
        raise ShapeError(f"dims {dims} must order 0..{len(x) - 2}, the per-sample dims of {fmt_shape(x)}")
    return (x[0], *(x[1 + d] for d in dims))


@layer("SelectToken", CAT, "Takes one token of a sequence (e.g. the class token of a ViT).", [
    ParamSpec("index", "int", 0, "Token position."),
], prefix="token", key_params=("index",))
def select_token(p: Params, xs: list[Shape]) -> Shape:
    (x,) = xs
    if len(x) != 3:
        raise ShapeError(f"expects a sequence LxE, receives {fmt_shape(x)}")
    if not -x[1] <= p["index"] < x[1]:
        raise ShapeError(f"index {p['index']} is outside the {x[1]} tokens")
    return (x[0], x[2])


def _sample_dim(dim: int, x: tuple[int, ...], field: str, rank: int | None = None) -> int:
    """``dim`` (batch is 0, negative counts from the end) as a non-negative dim other than the batch."""
    rank = len(x) if rank is None else rank
    if not -rank <= dim < rank:
        raise ShapeError(f"{field} {dim} is out of range for {fmt_shape(x, batch=True)} ({rank}-D, batch is dim 0)",
                         field=field)
    if dim % rank == 0:
        raise ShapeError(f"{field} {dim} is the batch dimension of {fmt_shape(x, batch=True)}; only per-sample "
                         "dims may change", field=field)
    return dim % rank


@layer("Transpose", CAT, "Swaps two per-sample dimensions (batch is 0 and stays).", [
    ParamSpec("dim0", "int", 1, "First dimension (batch is 0)."),
    ParamSpec("dim1", "int", 2, "Second dimension."),
], prefix="transpose", key_params=("dim0", "dim1"))
def transpose(p: Params, xs: list[Shape]) -> Shape:
    (x,) = xs
    a, b = _sample_dim(p["dim0"], x, "dim0"), _sample_dim(p["dim1"], x, "dim1")
    out = list(x)
    out[a], out[b] = x[b], x[a]
    return tuple(out)


@layer("Unsqueeze", CAT, "Inserts a dimension of size 1 (batch is 0 and stays first).", [
    ParamSpec("dim", "int", 1, "Position of the new dimension in the output (batch is 0)."),
], prefix="unsqueeze", key_params=("dim",))
def unsqueeze(p: Params, xs: list[Shape]) -> Shape:
    (x,) = xs
    d = _sample_dim(p["dim"], x, "dim", rank=len(x) + 1)
    return (*x[:d], 1, *x[d:])


@layer("Squeeze", CAT, "Removes a per-sample dimension of size 1 (batch is 0 and stays).", [
    ParamSpec("dim", "int", -1, "Dimension to remove (batch is 0); it must have size 1."),
], prefix="squeeze", key_params=("dim",))
def squeeze(p: Params, xs: list[Shape]) -> Shape:
    (x,) = xs
    d = _sample_dim(p["dim"], x, "dim")
    if x[d] != 1:
        raise ShapeError(f"cannot remove dim {d} of {fmt_shape(x, batch=True)}: its size is {x[d]}, not 1",
                         field="dim")
    return (*x[:d], *x[d + 1:])


@layer("Expand", CAT, "Repeats size-1 dimensions of each sample without copying (-1 keeps a size).", [
    ParamSpec("shape", "ints", [-1], "Per-sample sizes, one per dimension; -1 keeps the input's.", minimum=-1),
], prefix="expand", key_params=("shape",))
def expand(p: Params, xs: list[Shape]) -> Shape:
    (x,) = xs
    shape = p["shape"]
    if len(shape) != len(x) - 1:
        raise ShapeError(f"shape {shape} needs one size per dimension of {fmt_shape(x)} ({len(x) - 1}); new "
                         "dimensions would come before the batch", field="shape")
    if 0 in shape:
        raise ShapeError(f"shape {shape} holds a 0: sizes are positive, or -1 to keep the input's", field="shape")
    out = [x[0]]
    for i, (want, have) in enumerate(zip(shape, x[1:], strict=True)):
        if want == -1 or want == have:
            out.append(have)
        elif have == 1:
            out.append(want)
        else:
            raise ShapeError(f"cannot expand dim {i + 1} of {fmt_shape(x)} from {have} to {want}: only a size of "
                             "1 expands", field="shape")
    return tuple(out)


@layer("Slice", CAT, "Keeps positions start:end:step of one per-sample dimension (x[:, a:b] on channels).", [
    ParamSpec("dim", "int", 1, "Dimension to slice (batch is 0 and may not be sliced)."),
    ParamSpec("start", "int", 0, "First position kept; negative counts from the end."),
    ParamSpec("end", "int", None, "Position after the last kept (empty: to the end); negative counts from the end.",
              optional=True),
    ParamSpec("step", "int", 1, "Keep every step-th position.", minimum=1),
], prefix="slice", key_params=("dim", "start", "end"))
def slice_(p: Params, xs: list[Shape]) -> Shape:
    (x,) = xs
    d = _sample_dim(p["dim"], x, "dim")
    n = len(range(x[d])[p["start"]:p["end"]:p["step"]])
    if n == 0:
        end = "" if p["end"] is None else p["end"]
        raise ShapeError(f"keeps nothing: {p['start']}:{end} of dim {d} (size {x[d]}) is empty", field="start")
    return (*x[:d], n, *x[d + 1:])
