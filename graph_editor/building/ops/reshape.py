"""Layers that only rearrange: Flatten, Reshape, Permute, Transpose, Unsqueeze, Squeeze, Expand, Slice,
SelectToken.

``x.view(...)``, ``x.permute(...)``, ``x.transpose(...)`` and ``x[:, i]`` in traced code need the
traced shapes, so the importer maps those calls itself; the rules here cover the modules.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
from torch import fx, nn

from ...analysis.per_node import zero_flops
from ...importer.rules import (
    Mapped,
    Unmappable,
    attributes,
    const,
    function_rule,
    graph_fold,
    module_rule,
    static_ints,
    tensor,
)
from ..modules import Call, Example, Params, Shape, builder
from .param import expand_to_batch


# ------------------------------------------------------------------ modules of our own
# Plain nn.Module classes: a built network, its state_dict and its exported model.py (which copies
# their source) read like hand-written PyTorch.
class Reshape(nn.Module):
    """Reshape each sample; the batch dimension is kept, or with ``fold_batch`` computed from the whole
    tensor (windows folded into the batch dimension, or unfolded out of it)."""

    def __init__(self, shape: list[int], fold_batch: bool = False) -> None:
        super().__init__()
        self.shape = tuple(shape)
        self.fold_batch = fold_batch

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(-1 if self.fold_batch else x.shape[0], *self.shape)

    def extra_repr(self) -> str:
        return f"shape={self.shape}" + (", fold_batch=True" if self.fold_batch else "")


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

class Transpose(nn.Module):
    """Swap two dimensions (batch is 0 and never moves)."""

    def __init__(self, dim0: int, dim1: int) -> None:
        super().__init__()
        self.dim0, self.dim1 = dim0, dim1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.transpose(self.dim0, self.dim1)

    def extra_repr(self) -> str:
        return f"dim0={self.dim0}, dim1={self.dim1}"


class Unsqueeze(nn.Module):
    """Insert a dimension of size 1 at ``dim`` (batch is 0)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.unsqueeze(self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Squeeze(nn.Module):
    """Remove dimension ``dim`` of size 1 (batch is 0)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.squeeze(self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Expand(nn.Module):
    """Repeat size-1 dimensions of each sample to ``shape`` without copying (-1 keeps a size)."""

    def __init__(self, shape: list[int]) -> None:
        super().__init__()
        self.shape = tuple(shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.expand(x.shape[0], *self.shape)

    def extra_repr(self) -> str:
        return f"shape={self.shape}"


class Slice(nn.Module):
    """Keep positions ``start:end:step`` of dimension ``dim`` (batch is 0), as ``x[:, start:end]`` does."""

    def __init__(self, dim: int, start: int = 0, end: int | None = None, step: int = 1) -> None:
        super().__init__()
        self.dim, self.start, self.end, self.step = dim, start, end, step

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dim = self.dim % x.dim()   # a negative dim counts from the end, as the graph says it
        return x[(slice(None),) * dim + (slice(self.start, self.end, self.step),)]

    def extra_repr(self) -> str:
        return f"dim={self.dim}, start={self.start}, end={self.end}, step={self.step}"


zero_flops("Flatten", "Reshape", "Permute", "SelectToken", "Transpose", "Unsqueeze", "Squeeze", "Expand", "Slice")


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
    return Call(Reshape, (list(p["shape"]),), {"fold_batch": True} if p["fold_batch"] else {})


@module_rule(Reshape)
def _import_reshape(m: Reshape, xs: list[fx.Node]) -> Mapped:
    return Mapped("Reshape", {"shape": list(m.shape), "fold_batch": m.fold_batch}, xs)


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


# ------------------------------------------------------------------ Transpose
@builder("Transpose", example=Example((3, 4, 5), {"dim0": 1, "dim1": -1}))
def _transpose(p: Params, xs: list[Shape]) -> Call:
    return Call(Transpose, (p["dim0"], p["dim1"]))


module_rule(Transpose)(attributes("Transpose", "dim0", "dim1"))


@function_rule(torch.swapaxes, torch.swapdims, methods=("swapaxes", "swapdims"))
def _f_swap(input: Any, dim0: int, dim1: int) -> Mapped:
    """``x.transpose(a, b)`` itself the importer maps to Permute (it knows the rank); swapaxes/swapdims here."""
    return Mapped("Transpose", {"dim0": const(dim0, "dim0"), "dim1": const(dim1, "dim1")}, [tensor(input)])


# ------------------------------------------------------------------ Unsqueeze
@builder("Unsqueeze", example=Example((3, 4), {"dim": -1}))
def _unsqueeze(p: Params, xs: list[Shape]) -> Call:
    return Call(Unsqueeze, (p["dim"],))


module_rule(Unsqueeze)(attributes("Unsqueeze", "dim"))


@function_rule(torch.unsqueeze, methods=("unsqueeze",))
def _f_unsqueeze(input: Any, dim: int) -> Mapped:
    return Mapped("Unsqueeze", {"dim": const(dim, "dim")}, [tensor(input)])


# ------------------------------------------------------------------ Squeeze
@builder("Squeeze", example=Example((3, 1, 4), {"dim": 2}))
def _squeeze(p: Params, xs: list[Shape]) -> Call:
    return Call(Squeeze, (p["dim"],))


module_rule(Squeeze)(attributes("Squeeze", "dim"))


@function_rule(torch.squeeze, methods=("squeeze",))
def _f_squeeze(input: Any, dim: Any = None) -> Mapped:
    dim = const(dim, "dim")
    if not isinstance(dim, int):  # every size-1 dim (the batch of 1 too), or several at once
        raise Unmappable(f"squeeze with dim={dim!r}; only squeezing one given dim maps")
    return Mapped("Squeeze", {"dim": dim}, [tensor(input)])


# ------------------------------------------------------------------ Expand
@builder("Expand", example=Example((3, 1, 4), {"shape": [-1, 5, 4]}))
def _expand(p: Params, xs: list[Shape]) -> Call:
    return Call(Expand, (list(p["shape"]),))


@module_rule(Expand)
def _import_expand(m: Expand, xs: list[fx.Node]) -> Mapped:
    return Mapped("Expand", {"shape": list(m.shape)}, xs)


@function_rule(methods=("expand",))
def _m_expand(input: Any, *sizes: Any, size: Any = None) -> Mapped:
    """``x.expand(n, -1, 4)`` / ``x.expand((n, -1, 4))``: the batch entry must keep the batch
    (-1, or ``x.size(0)`` computed while tracing); the others are constants."""
    if size is not None:
        sizes = (size,)
    if len(sizes) == 1 and isinstance(sizes[0], list | tuple):
        sizes = tuple(sizes[0])
    if not sizes:
        raise Unmappable("expand without sizes")
    batch, *rest = sizes
    if (to_batch := expand_to_batch(input, batch, rest)) is not None:  # a class token to the tokens' batch
        return to_batch
    if not isinstance(batch, fx.Node) and batch != -1:
        raise Unmappable(f"expands the batch dimension to {batch!r}; only per-sample dims may be expanded")
    return Mapped("Expand", {"shape": [int(const(s, "size")) for s in rest]}, [tensor(input)])


# ------------------------------------------------------------------ Slice
@builder("Slice", example=Example((6, 5), {"dim": 1, "start": 1, "end": -1, "step": 2}))
def _slice(p: Params, xs: list[Shape]) -> Call:
    return Call(Slice, (p["dim"], p["start"], p["end"], p["step"]))   # as written: it imports back the same


module_rule(Slice)(attributes("Slice", "dim", "start", "end", "step"))


@function_rule(torch.narrow, methods=("narrow",))
def _f_narrow(input: Any, dim: int, start: int, length: int) -> Mapped:
    dim, start, length = const(dim, "dim"), const(start, "start"), const(length, "length")
    if start < 0:
        raise Unmappable(f"narrow from a negative start ({start}); its end depends on the size")
    return Mapped("Slice", {"dim": dim, "start": start, "end": start + length}, [tensor(input)])


@function_rule(operator.getitem)
def _f_slice(input: Any, index: Any) -> Mapped:
    """``x[:, a:b]``, ``x[..., ::2]``: one per-sample dim sliced, every other one whole. (``x[:, i]``, one
    token of a sequence, the importer maps to SelectToken itself: it needs the rank.)"""
    items = list(index) if isinstance(index, tuple) else [index]
    whole = slice(None)
    if items.count(Ellipsis) > 1 or not all(isinstance(i, slice) or i is Ellipsis for i in items):
        raise Unmappable(f"indexing x[{_index_text(index)}]; only slicing one dim (x[:, a:b]) or one token of a "
                         "sequence (x[:, i]) maps")
    cut = [k for k, i in enumerate(items) if i is not Ellipsis and i != whole]
    if len(cut) != 1:
        raise Unmappable(f"indexing x[{_index_text(index)}]; only slicing exactly one dim maps")
    (k,) = cut
    dots = items.index(Ellipsis) if Ellipsis in items else None
    dim = k if dots is None or k < dots else k - len(items)  # after "...": counted from the end
    if dim == 0:
        raise Unmappable(f"x[{_index_text(index)}] slices the batch dimension; only per-sample dims may be sliced")
    s = items[k]
    # a bound read from a tensor's size (PiT's x[:, :cls_tokens.shape[1]]) specialises at the import's shape
    start, end, step = (static_ints(v, what) for v, what in ((s.start, "start"), (s.stop, "end"), (s.step, "step")))
    return Mapped("Slice", {"dim": dim, "start": 0 if start is None else start, "end": end,
                            "step": 1 if step is None else step}, [tensor(input)])


def _index_text(index: Any) -> str:
    def one(i: Any) -> str:
        if i is Ellipsis:
            return "..."
        if isinstance(i, slice):
            text = ":".join("" if v is None else str(v) for v in (i.start, i.stop))
            return text if i.step is None else f"{text}:{i.step}"
        return str(i)
    return ", ".join(one(i) for i in index) if isinstance(index, tuple) else one(index)


@graph_fold("slices one dim at a time")
def split_multi_dim_slices(gm: fx.GraphModule) -> None:
    """``x[:, ::2, ::2]`` (LeViT's subsample, space-to-depth) as ``x[:, ::2][:, :, ::2]``: slices of different dims
    compose, so each becomes its own Slice node. Only indexing by slices (and one ``...``) is split."""
    changed = False
    for n in list(gm.graph.nodes):
        if n.op != "call_function" or n.target is not operator.getitem or not isinstance(n.args[1], tuple):
            continue
        items = list(n.args[1])
        if items.count(Ellipsis) > 1 or not all(isinstance(i, slice) or i is Ellipsis for i in items):
            continue
        cut = [k for k, i in enumerate(items) if i is not Ellipsis and i != slice(None)]
        if len(cut) < 2:
            continue
        x = n.args[0]
        with gm.graph.inserting_before(n):
            for k in cut:  # each cut keeps the rank, so the positions stay those written
                one = tuple(i if j == k or i is Ellipsis else slice(None) for j, i in enumerate(items))
                x = gm.graph.call_function(operator.getitem, (x, one))
                x.meta = dict(n.meta)
        n.replace_all_uses_with(x)
        gm.graph.erase_node(n)
        changed = True
    if changed:
        gm.recompile()


@graph_fold("repeat each sample")
def repeat_samples(gm: fx.GraphModule) -> None:
    """``x.repeat_interleave(k, dim=0)`` (GCViT's global query, repeated to each image's windows) as
    ``x.unsqueeze(1).expand(-1, k, ...).flatten(0, 1)``: the same values, as an Expand and a fold into the batch.
    Only where ``k`` is a number (the exported program's; fx's is size arithmetic) and the rank is known."""
    changed = False
    for n in list(gm.graph.nodes):
        if n.target not in ("repeat_interleave", torch.repeat_interleave, torch.ops.aten.repeat_interleave.self_int):
            continue
        args: tuple[Any, ...] = (*n.args, None, None)
        x, k = args[0], args[1]
        dim = args[2] if args[2] is not None else n.kwargs.get("dim")
        value = x.meta.get("val") if isinstance(x, fx.Node) else None
        if not isinstance(k, int) or dim != 0 or not isinstance(value, torch.Tensor) or set(n.kwargs) - {
                "dim", "output_size"}:
            continue
        with gm.graph.inserting_before(n):
            one = gm.graph.call_method("unsqueeze", (x, 1))
            wide = gm.graph.call_method("expand", (one, -1, k, *[-1] * (value.dim() - 1)))
            folded = gm.graph.call_method("flatten", (wide, 0, 1))
        for made in (one, wide, folded):
            made.meta = {k_: v for k_, v in n.meta.items() if k_ != "val"}
        n.replace_all_uses_with(folded)
        gm.graph.erase_node(n)
        changed = True
    if changed:
        gm.recompile()
