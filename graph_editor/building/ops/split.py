"""Layers with several outputs: Split and Chunk. Their modules return a tuple; the built graph reads
each used output with ``operator.getitem``, and an import maps ``parts[i]`` back to output ``i``."""

from __future__ import annotations

from typing import Any

import torch
from torch import fx, nn

from ...analysis.per_node import zero_flops
from ...importer.rules import Mapped, Unmappable, const, function_rule, module_rule, tensor
from ...model.layers.split import chunk_sizes
from ..modules import Call, Example, Params, Shape, builder


# ------------------------------------------------------------------ modules of our own
class Split(nn.Module):
    """Cuts a tensor into parts of the given sizes along ``dim``; returns them as a tuple."""

    def __init__(self, sizes: list[int], dim: int = 1) -> None:
        super().__init__()
        self.sizes = list(sizes)
        self.dim = dim

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return torch.split(x, self.sizes, dim=self.dim)

    def extra_repr(self) -> str:
        return f"sizes={self.sizes}, dim={self.dim}"


class Chunk(nn.Module):
    """Cuts a tensor into ``chunks`` parts of equal size along ``dim``; returns them as a tuple."""

    def __init__(self, chunks: int, dim: int = 1) -> None:
        super().__init__()
        self.chunks = chunks
        self.dim = dim

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return torch.chunk(x, self.chunks, dim=self.dim)

    def extra_repr(self) -> str:
        return f"chunks={self.chunks}, dim={self.dim}"


# ------------------------------------------------------------------ builders, FLOPs, import rules
@builder("Split", example=Example((6, 4), {"sizes": [1, 2, 3], "dim": 1}))
def _split(p: Params, xs: list[Shape]) -> Call:
    return Call(Split, (list(p["sizes"]), p["dim"]))


@builder("Chunk", example=Example((4, 6), {"chunks": 3, "dim": -1}))
def _chunk(p: Params, xs: list[Shape]) -> Call:
    return Call(Chunk, (p["chunks"], p["dim"]))


zero_flops("Split", "Chunk")  # views


@module_rule(Split)
def _import_split(m: Split, xs: list[fx.Node]) -> Mapped:
    return Mapped("Split", {"sizes": list(m.sizes), "dim": m.dim}, xs)


@module_rule(Chunk)
def _import_chunk(m: Chunk, xs: list[fx.Node]) -> Mapped:
    return Mapped("Chunk", {"chunks": m.chunks, "dim": m.dim}, xs)


def _traced_shape(x: fx.Node) -> torch.Size:
    """The shape ``x`` had when the importer ran the module on meta tensors."""
    value = x.meta.get("val")
    if not isinstance(value, torch.Tensor):
        raise Unmappable("cuts a value whose shape is not known")
    return value.shape


def _dim(x: fx.Node, dim: Any) -> tuple[int, int]:
    """``dim`` as a parameter and the size of that dimension; the batch dimension is refused."""
    dim = const(dim, "dim")
    shape = _traced_shape(x)
    if not -len(shape) <= dim < len(shape):
        raise Unmappable(f"dim {dim} is out of range for a {len(shape)}-D tensor")
    if dim % len(shape) == 0:
        raise Unmappable("cuts the batch dimension; only per-sample dimensions map")
    return dim, shape[dim]


@function_rule(torch.split, methods=("split",))
def _f_split(tensor_: Any, split_size_or_sections: Any = None, dim: Any = 0, *, split_size: Any = None) -> Mapped:
    x = tensor(tensor_)
    sections = const(split_size if split_size_or_sections is None else split_size_or_sections, "split_size")
    dim, n = _dim(x, dim)
    if isinstance(sections, int):  # parts of this size, the last one smaller
        if sections < 1:
            raise Unmappable(f"split size {sections}")
        sizes = [min(sections, n - i) for i in range(0, n, sections)]
    else:
        sizes = [int(s) for s in sections]
    return Mapped("Split", {"sizes": sizes, "dim": dim}, [x])


@function_rule(torch.chunk, methods=("chunk",))
def _f_chunk(input: Any, chunks: Any, dim: Any = 0) -> Mapped:
    x = tensor(input)
    dim, n = _dim(x, dim)
    chunks = const(chunks, "chunks")
    sizes = chunk_sizes(n, chunks)
    if len(sizes) != chunks:  # torch.chunk(x, 4) of 5 makes 3 parts: the Split of those sizes
        return Mapped("Split", {"sizes": sizes, "dim": dim}, [x])
    return Mapped("Chunk", {"chunks": chunks, "dim": dim}, [x])


# ------------------------------------------------------------------ Unbind
class Unbind(nn.Module):
    """Takes a tensor apart along ``dim`` (of ``count`` positions); returns the slices as a tuple."""

    def __init__(self, count: int, dim: int = 1) -> None:
        super().__init__()
        self.count = count
        self.dim = dim

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return torch.unbind(x, dim=self.dim)

    def extra_repr(self) -> str:
        return f"count={self.count}, dim={self.dim}"


@builder("Unbind", example=Example((3, 2, 4), {"count": 2, "dim": 2}))
def _unbind(p: Params, xs: list[Shape]) -> Call:
    return Call(Unbind, (p["count"], p["dim"]))


zero_flops("Unbind")


@module_rule(Unbind)
def _import_unbind(m: Unbind, xs: list[fx.Node]) -> Mapped:
    return Mapped("Unbind", {"count": m.count, "dim": m.dim}, xs)


@function_rule(torch.unbind, methods=("unbind",))
def _f_unbind(input: Any, dim: Any = 0) -> Mapped:
    x = tensor(input)
    dim, n = _dim(x, dim)
    return Mapped("Unbind", {"count": int(n), "dim": dim}, [x])


def unbind_after_permute(x: fx.Node, dims: list[int]) -> tuple[Mapped, list[int] | None] | None:
    """``x.permute(dims).unbind(0)`` where the permute moves the batch to dim 1 (timm's attention:
    ``qkv.reshape(B, N, 3, H, d).permute(2, 0, 3, 1, 4).unbind(0)``) as an Unbind of ``x`` along
    ``dims[0]`` and the per-sample permutation each part then needs (None when it is the identity);
    None when the pattern does not hold."""
    rank = len(dims)
    if rank < 3 or dims[1] != 0 or sorted(dims) != list(range(rank)):
        return None
    rest = [d for d in range(rank) if d != dims[0]]  # x's dims after the slice, in order
    order = [rest.index(d) for d in dims[1:]]  # each part's dims, the batch first
    perm: list[int] | None = None if order == list(range(rank - 1)) else [d - 1 for d in order[1:]]
    mapped = Mapped("Unbind", {"count": int(_traced_shape(x)[dims[0]]), "dim": dims[0]}, [x])
    return mapped, perm
