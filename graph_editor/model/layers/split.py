"""Layers with several outputs: Split (given sizes), Chunk (n equal parts) and Unbind (every position)
along a dimension.

Their outputs are ports ``out``, ``out1``, ``out2``... as many as the parameters say; an output
nobody reads is allowed (``q, k, _ = x.split(...)``).
"""

from __future__ import annotations

from ..catalog import Params, ParamSpec, Shape, fmt_shape, layer
from ..errors import ShapeError
from ._rules import norm_dim

CAT = "Shape"
MAX_OUTPUTS = 64  # each output is a port on the canvas


def _along(x: Shape, dim: int) -> int:
    d = norm_dim(dim, len(x))
    if d == 0:
        raise ShapeError("cannot split the batch dimension", field="dim")
    return d


def _parts(x: Shape, d: int, sizes: list[int]) -> list[Shape]:
    return [(*x[:d], s, *x[d + 1:]) for s in sizes]


@layer("Split", CAT, "Cuts a tensor into parts of the given sizes along a dimension (torch.split); one "
       "output per part.", [
           ParamSpec("sizes", "ints", [2, 2], "Size of each part, in order; they add up to the dimension's size.",
                     minimum=1),
           ParamSpec("dim", "int", 1, "Dimension to cut (batch is 0)."),
       ], prefix="split", key_params=("sizes", "dim"), output_count=lambda p: len(p["sizes"]))
def split(p: Params, xs: list[Shape]) -> list[Shape]:
    (x,) = xs
    sizes = p["sizes"]
    if len(sizes) > MAX_OUTPUTS:
        raise ShapeError(f"makes {len(sizes)} parts; at most {MAX_OUTPUTS}", field="sizes")
    d = _along(x, p["dim"])
    if sum(sizes) != x[d]:
        raise ShapeError(f"sizes {sizes} add up to {sum(sizes)}, but dim {d} of {fmt_shape(x)} has {x[d]}",
                         field="sizes")
    return _parts(x, d, sizes)


def chunk_sizes(n: int, chunks: int) -> list[int]:
    """The sizes ``torch.chunk`` cuts ``n`` into: parts of ceil(n / chunks), the last smaller."""
    step = -(-n // chunks)
    return [min(step, n - i) for i in range(0, n, step)]


@layer("Chunk", CAT, "Cuts a tensor into n parts of equal size along a dimension (torch.chunk); one output "
       "per part.", [
           ParamSpec("chunks", "int", 2, "Number of parts.", minimum=1, maximum=MAX_OUTPUTS),
           ParamSpec("dim", "int", 1, "Dimension to cut (batch is 0)."),
       ], prefix="chunk", key_params=("chunks", "dim"), output_count=lambda p: p["chunks"])
def chunk(p: Params, xs: list[Shape]) -> list[Shape]:
    (x,) = xs
    d = _along(x, p["dim"])
    n, chunks = x[d], p["chunks"]
    sizes = chunk_sizes(n, chunks)
    if len(sizes) != chunks:
        raise ShapeError(f"cannot cut dim {d} of {fmt_shape(x)} ({n}) into {chunks} parts: torch.chunk makes "
                         f"{len(sizes)} ({', '.join(map(str, sizes))}); use a Split to choose the sizes",
                         field="chunks")
    return _parts(x, d, sizes)


@layer("Unbind", CAT, "Takes a tensor apart along a dimension (torch.unbind): one output per position, that "
       "dimension removed.", [
           ParamSpec("count", "int", 3, "How many outputs: the size of the dimension.", minimum=1,
                     maximum=MAX_OUTPUTS),
           ParamSpec("dim", "int", 1, "Dimension to take apart (batch is 0)."),
       ], prefix="unbind", key_params=("count", "dim"), output_count=lambda p: p["count"])
def unbind(p: Params, xs: list[Shape]) -> list[Shape]:
    (x,) = xs
    d = _along(x, p["dim"])
    if x[d] != p["count"]:
        raise ShapeError(f"dim {d} of {fmt_shape(x)} has {x[d]} positions, not {p['count']}", field="count")
    return [(*x[:d], *x[d + 1:])] * p["count"]
