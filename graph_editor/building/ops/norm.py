"""Normalisation layers: no FLOPs that ``FlopCounterMode`` counts."""

from __future__ import annotations

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
    library_rule,
    module_rule,
    tensor,
)
from ..modules import Call, Example, Params, Shape, builder, or_input


# ------------------------------------------------------------------ modules of our own
# A plain nn.Module class: a built network, its state_dict and its exported model.py (which copies
# its source) read like hand-written PyTorch.
class LayerNorm2d(nn.LayerNorm):
    """LayerNorm over the channels of an NCHW image, at every position (timm's LayerNorm2d,
    torchvision ConvNeXt's permute + LayerNorm + permute); same weights as ``nn.LayerNorm(C)``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.permute(0, 2, 3, 1)
        x = nn.functional.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        return x.permute(0, 3, 1, 2)


def _bias(p: Params, affine: str) -> dict[str, Any]:
    """The constructor's ``bias`` argument where it is off (an affine norm without a shift)."""
    return {"bias": False} if p[affine] and not p["bias"] else {}


# ------------------------------------------------------------------ BatchNorm1d, BatchNorm2d
def _bn(cls: type[nn.Module], p: dict[str, Any], xs: list[tuple[int, ...]]) -> Call:
    return Call(cls, (or_input(p["num_features"], xs[0][1]),),
                {"eps": p["eps"], "momentum": p["momentum"], "affine": p["affine"]})


@builder("BatchNorm1d", example=Example((4, 5), {"momentum": 0.2}))
def _bn1d(p: Params, xs: list[Shape]) -> Call:
    return _bn(nn.BatchNorm1d, p, xs)


@builder("BatchNorm2d", example=Example((4, 3, 3), {"eps": 1e-3}))
def _bn2d(p: Params, xs: list[Shape]) -> Call:
    return _bn(nn.BatchNorm2d, p, xs)


zero_flops("BatchNorm1d", "BatchNorm2d")


@module_rule(nn.BatchNorm1d, nn.BatchNorm2d)
def _import_bn(m: nn.BatchNorm1d | nn.BatchNorm2d, xs: list[fx.Node]) -> Mapped:
    if not m.track_running_stats or m.momentum is None:
        raise Unmappable("BatchNorm without running statistics or with a cumulative average (momentum=None)")
    kind = "BatchNorm1d" if isinstance(m, nn.BatchNorm1d) else "BatchNorm2d"  # a subclass imports as its base
    return Mapped(kind, {"num_features": m.num_features, "eps": m.eps, "momentum": m.momentum,
                                     "affine": m.affine}, xs)


# ------------------------------------------------------------------ LayerNorm
@builder("LayerNorm", example=Example((5, 8), {"eps": 1e-6}))
def _ln(p: Params, xs: list[Shape]) -> Call:
    return Call(nn.LayerNorm, (tuple(or_input(p["normalized_shape"], [xs[0][-1]])),),
                {"eps": p["eps"], "elementwise_affine": p["elementwise_affine"], **_bias(p, "elementwise_affine")})


zero_flops("LayerNorm")


@module_rule(nn.LayerNorm)
def _import_ln(m: nn.LayerNorm, xs: list[fx.Node]) -> Mapped:
    return Mapped("LayerNorm", {"normalized_shape": list(m.normalized_shape), "eps": m.eps,
                                "elementwise_affine": m.elementwise_affine, "bias": m.bias is not None or
                                not m.elementwise_affine}, xs)


# ------------------------------------------------------------------ LayerNorm2d
@builder("LayerNorm2d", example=Example((4, 3, 3), {"eps": 1e-5}))
def _ln2d(p: Params, xs: list[Shape]) -> Call:
    return Call(LayerNorm2d, (or_input(p["num_channels"], xs[0][1]),),
                {"eps": p["eps"], "elementwise_affine": p["elementwise_affine"], **_bias(p, "elementwise_affine")})


zero_flops("LayerNorm2d")


@module_rule(LayerNorm2d)
@library_rule("timm.layers.norm.LayerNorm2d", "torchvision.models.convnext.LayerNorm2d")  # same forward
def _import_ln2d(m: nn.LayerNorm, xs: list[fx.Node]) -> Mapped:
    return Mapped("LayerNorm2d", {"num_channels": m.normalized_shape[0], "eps": m.eps,
                                  "elementwise_affine": m.elementwise_affine, "bias": m.bias is not None or
                                  not m.elementwise_affine}, xs)


# ------------------------------------------------------------------ GroupNorm
@builder("GroupNorm", example=Example((4, 3, 3), {"num_groups": 2}))
def _gn(p: Params, xs: list[Shape]) -> Call:
    return Call(nn.GroupNorm, (p["num_groups"], or_input(p["num_channels"], xs[0][1])),
                {"eps": p["eps"], "affine": p["affine"], **_bias(p, "affine")})


zero_flops("GroupNorm")


@module_rule(nn.GroupNorm)
def _import_gn(m: nn.GroupNorm, xs: list[fx.Node]) -> Mapped:
    return Mapped("GroupNorm", {"num_groups": m.num_groups, "num_channels": m.num_channels, "eps": m.eps,
                                "affine": m.affine, "bias": m.bias is not None or not m.affine}, xs)


# ------------------------------------------------------------------ Normalize
class Normalize(nn.Module):
    """``F.normalize(x, p, dim, eps)``: each vector along ``dim`` divided by its p-norm."""

    def __init__(self, p: float = 2.0, dim: int = -1, eps: float = 1e-12) -> None:
        super().__init__()
        self.p, self.dim, self.eps = p, dim, eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.normalize(x, self.p, self.dim, self.eps)

    def extra_repr(self) -> str:
        return f"p={self.p}, dim={self.dim}, eps={self.eps}"


@builder("Normalize", example=Example((3, 4), {"p": 2.0, "dim": 1}))
def _normalize(p: Params, xs: list[Shape]) -> Call:
    return Call(Normalize, (float(p["p"]), p["dim"], float(p["eps"])))


zero_flops("Normalize")  # a norm and a division: FlopCounterMode counts neither
module_rule(Normalize)(attributes("Normalize", "p", "dim", "eps"))


@function_rule(torch.nn.functional.normalize)
def _f_normalize(input: Any, p: Any = 2.0, dim: Any = 1, eps: Any = 1e-12, out: Any = None) -> Mapped:
    dim = const(dim, "dim")
    value = tensor(input).meta.get("val")
    if isinstance(value, torch.Tensor) and dim % value.dim() == 0:
        raise Unmappable("normalises across the batch dimension; only per-sample dims map")
    return Mapped("Normalize", {"p": float(const(p, "p")), "dim": dim, "eps": float(const(eps, "eps"))},
                  [tensor(input)])


# ------------------------------------------------------------------ RMSNorm, RMSNorm2d
# Each forward computes as timm does: the mean square, or ('std', timm's SimpleNorm) the unbiased variance
class RMSNorm(nn.Module):
    """``x / sqrt(mean(x^2) + eps) * weight`` over the trailing dims, the mean not subtracted (timm's RmsNorm;
    ``divide_by='std'``: by the standard deviation, timm's SimpleNorm)."""

    def __init__(self, normalized_shape: list[int] | int, eps: float = 1e-6, elementwise_affine: bool = True,
                 divide_by: str = "rms") -> None:
        super().__init__()
        shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
        self.normalized_shape, self.eps, self.divide_by = tuple(shape), eps, divide_by
        self.weight = nn.Parameter(torch.ones(shape)) if elementwise_affine else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dims = tuple(range(-1, -len(self.normalized_shape) - 1, -1))
        if self.divide_by == "std":
            v = torch.var(x, dim=dims, keepdim=True)
        else:
            v = torch.mean(x.pow(2), dim=dims, keepdim=True)
        x = x * torch.rsqrt(v + self.eps)
        return x * self.weight if self.weight is not None else x

    def extra_repr(self) -> str:
        return f"{list(self.normalized_shape)}, eps={self.eps}, divide_by={self.divide_by!r}"


class RMSNorm2d(nn.Module):
    """RMSNorm over the channels of an NCHW image at every position (timm's RmsNorm2d; ``divide_by='std'``:
    SimpleNorm2d); the weight is one scale per channel."""

    def __init__(self, num_channels: int, eps: float = 1e-6, elementwise_affine: bool = True,
                 divide_by: str = "rms") -> None:
        super().__init__()
        self.num_channels, self.eps, self.divide_by = num_channels, eps, divide_by
        self.weight = nn.Parameter(torch.ones(num_channels)) if elementwise_affine else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.divide_by == "std":
            v = torch.var(x, dim=1, keepdim=True)
        else:
            v = torch.mean(x.pow(2), dim=1, keepdim=True)
        x = x * torch.rsqrt(v + self.eps)
        return x * self.weight.reshape(1, -1, 1, 1) if self.weight is not None else x

    def extra_repr(self) -> str:
        return f"{self.num_channels}, eps={self.eps}, divide_by={self.divide_by!r}"


def _rms_kwargs(p: Params) -> dict[str, Any]:
    return {"eps": p["eps"], "elementwise_affine": p["elementwise_affine"], "divide_by": p["divide_by"]}


@builder("RMSNorm", example=Example((5, 8), {"divide_by": "std"}))
def _rms(p: Params, xs: list[Shape]) -> Call:
    return Call(RMSNorm, (list(or_input(p["normalized_shape"], [xs[0][-1]])),), _rms_kwargs(p))


@builder("RMSNorm2d", example=Example((4, 3, 3), {"eps": 1e-5}))
def _rms2d(p: Params, xs: list[Shape]) -> Call:
    return Call(RMSNorm2d, (or_input(p["num_channels"], xs[0][1]),), _rms_kwargs(p))


zero_flops("RMSNorm", "RMSNorm2d")  # squares, a mean, rsqrt and products: FlopCounterMode counts none


def rms_params(m: Any, divide_by: str) -> dict[str, Any]:
    """An RMS norm module's parameters (``eps=None``: nn.RMSNorm's float32 machine epsilon)."""
    eps = m.eps if m.eps is not None else float(torch.finfo(torch.float32).eps)
    return {"eps": float(eps), "elementwise_affine": m.weight is not None, "divide_by": divide_by}


@module_rule(RMSNorm, nn.RMSNorm)
@library_rule("timm.layers.norm.RmsNorm", "timm.layers.norm.SimpleNorm")
def _import_rms(m: Any, xs: list[fx.Node]) -> Mapped:
    divide_by = "std" if type(m).__name__ == "SimpleNorm" else getattr(m, "divide_by", "rms")
    return Mapped("RMSNorm", {"normalized_shape": list(m.normalized_shape), **rms_params(m, divide_by)}, xs)


@module_rule(RMSNorm2d)
@library_rule("timm.layers.norm.RmsNorm2d", "timm.layers.norm.SimpleNorm2d")
def _import_rms2d(m: Any, xs: list[fx.Node]) -> Mapped:
    if isinstance(m, RMSNorm2d):
        return Mapped("RMSNorm2d", {"num_channels": m.num_channels, **rms_params(m, m.divide_by)}, xs)
    if len(m.normalized_shape) != 1:
        raise Unmappable(f"a 2-D RMS norm over {list(m.normalized_shape)}; only over the channels maps")
    divide_by = "std" if type(m).__name__ == "SimpleNorm2d" else "rms"
    return Mapped("RMSNorm2d", {"num_channels": m.normalized_shape[0], **rms_params(m, divide_by)}, xs)
