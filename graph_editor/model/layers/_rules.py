"""Small helpers shared by the shape rules."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..catalog import Shape, fmt_shape
from ..errors import ShapeError


def need_rank(x: Shape, rank: int | Sequence[int], what: str) -> None:
    """Raise unless ``x`` (batch first) has one of the given ranks."""
    ranks = (rank,) if isinstance(rank, int) else tuple(rank)
    if len(x) not in ranks:
        raise ShapeError(f"expects {what}, receives {fmt_shape(x) or 'a scalar'} ({len(x) - 1}-D per sample)")


def need_dim(x: Shape, dim: int, expected: int | None, what: str, hint: str = "") -> int:
    """The size of ``x[dim]``, checked against ``expected`` when that is set."""
    got = x[dim]
    if expected is not None and got != expected:
        raise ShapeError(f"expects {expected} {what}, receives {got} ({fmt_shape(x)}){hint}")
    return got


def conv_out(size: int, kernel: int, stride: int, padding: int, dilation: int = 1,
             ceil_mode: bool = False) -> int:
    """Output size of a convolution or pooling window, exactly as PyTorch computes it
    (``pooling_output_shape`` in ATen); 0 or less means the output would be empty."""
    num = size + 2 * padding - dilation * (kernel - 1) - 1
    out = (num + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + padding:
        out -= 1  # the last window must start inside the input or the left padding
    return out


def norm_dim(dim: int, rank: int, what: str = "dim") -> int:
    if not -rank <= dim < rank:
        raise ShapeError(f"{what} {dim} is out of range for a {rank}-D tensor (batch included)")
    return dim % rank


def prod(xs: Iterable[int]) -> int:
    out = 1
    for v in xs:
        out *= v
    return out
