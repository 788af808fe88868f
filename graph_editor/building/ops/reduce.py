"""Reductions over chosen dimensions: Mean, Sum, Amax. ``FlopCounterMode`` counts no reduction."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import fx, nn

from ...analysis.per_node import zero_flops
from ...importer.rules import Mapped, Unmappable, const, function_rule, module_rule, pair, tensor
from ..modules import Call, Example, Params, Shape, builder


# ------------------------------------------------------------------ modules of our own
# Plain nn.Module classes: a built network, its state_dict and its exported model.py (which copies
# their source) read like hand-written PyTorch.
class Mean(nn.Module):
    """Mean over ``dims`` (batch is 0), e.g. global average pooling over dims (2, 3)."""

    def __init__(self, dims: list[int], keepdim: bool = False) -> None:
        super().__init__()
        self.dims = tuple(dims)
        self.keepdim = keepdim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(self.dims, keepdim=self.keepdim)

    def extra_repr(self) -> str:
        return f"dims={self.dims}, keepdim={self.keepdim}"


class Sum(nn.Module):
    """Sum over ``dims`` (batch is 0)."""

    def __init__(self, dims: list[int], keepdim: bool = False) -> None:
        super().__init__()
        self.dims = tuple(dims)
        self.keepdim = keepdim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum(self.dims, keepdim=self.keepdim)

    def extra_repr(self) -> str:
        return f"dims={self.dims}, keepdim={self.keepdim}"


class Amax(nn.Module):
    """Maximum over ``dims`` (batch is 0), e.g. global max pooling over dims (2, 3)."""

    def __init__(self, dims: list[int], keepdim: bool = False) -> None:
        super().__init__()
        self.dims = tuple(dims)
        self.keepdim = keepdim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.amax(self.dims, keepdim=self.keepdim)

    def extra_repr(self) -> str:
        return f"dims={self.dims}, keepdim={self.keepdim}"


def _dims(dim: Any, what: str) -> list[int]:
    """A reduction's ``dim`` argument as a list; reducing every dim (the batch too) does not map."""
    dim = const(dim, "dim")
    if dim is None or (isinstance(dim, list | tuple) and not dim):
        raise Unmappable(f"{what} over every dimension, the batch included; only per-sample dims map")
    if isinstance(dim, int):
        return [dim]
    if isinstance(dim, list | tuple) and all(isinstance(d, int) for d in dim):
        return [int(d) for d in dim]
    raise Unmappable(f"{what} over dim={dim!r}; only integer dims map")


def _reduction(type_: str, cls: type[nn.Module], function: Any, method: str) -> None:
    def build(p: Params, xs: list[Shape]) -> Call:
        return Call(cls, (list(p["dims"]),), {"keepdim": p["keepdim"]})

    def read(m: Any, xs: list[fx.Node]) -> Mapped:
        return Mapped(type_, {"dims": list(m.dims), "keepdim": m.keepdim}, xs)

    def import_call(input: Any, dim: Any = None, keepdim: bool = False, *, dtype: Any = None,
                    out: Any = None) -> Mapped:
        if dtype is not None:
            raise Unmappable(f"{method} with dtype={dtype!r}")
        return Mapped(type_, {"dims": _dims(dim, method), "keepdim": const(keepdim, "keepdim")}, [tensor(input)])

    builder(type_, example=Example((3, 4, 5), {"dims": [2, -1], "keepdim": type_ == "Sum"}))(build)
    zero_flops(type_)  # FlopCounterMode counts matrix products and convolutions, not reductions
    module_rule(cls)(read)
    function_rule(function, methods=(method,))(import_call)


_reduction("Mean", Mean, torch.mean, "mean")
_reduction("Sum", Sum, torch.sum, "sum")
_reduction("Amax", Amax, torch.amax, "amax")


# ------------------------------------------------------------------ global max pooling
def _global_max(output_size: Any, return_indices: bool, xs: list[fx.Node]) -> Mapped:
    """Adaptive max pooling to 1x1 is the maximum over H and W, kept as 1x1: Amax((2, 3), keepdim)."""
    if return_indices:
        raise Unmappable("adaptive max pooling with return_indices=True")
    if output_size is None or (not isinstance(output_size, int) and None in tuple(output_size)) or pair(
            output_size) != [1, 1]:
        raise Unmappable(f"adaptive max pooling to {output_size!r}; only global max pooling (output 1) maps, as "
                         "Amax over dims 2, 3")
    return Mapped("Amax", {"dims": [2, 3], "keepdim": True}, xs)


@module_rule(nn.AdaptiveMaxPool2d)
def _import_adaptive_max(m: nn.AdaptiveMaxPool2d, xs: list[fx.Node]) -> Mapped:
    return _global_max(m.output_size, m.return_indices, xs)


@function_rule(F.adaptive_max_pool2d)
def _f_adaptive_max(input: Any, output_size: Any, return_indices: bool = False) -> Mapped:
    return _global_max(const(output_size, "output_size"), const(return_indices, "return_indices"), [tensor(input)])
