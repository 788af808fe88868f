"""Convolutions: Conv1d, Conv2d (groups, so depthwise too), Conv3d and ConvTranspose2d."""

from __future__ import annotations

from typing import Any

import torch
from torch import fx, nn
from torch.utils.flop_counter import conv_flop_count

from ...analysis.per_node import flop_rule
from ...importer.rules import Mapped, Unmappable, library_rule, module_rule
from ..modules import Call, Example, Params, Shape, builder, or_input


def _conv(cls: type[nn.Module], p: dict[str, Any], xs: list[tuple[int, ...]], **extra: Any) -> Call:
    """``nn.Conv2d(3, 8, kernel_size=(3, 3), stride=..., ...)``: the call a reader would write."""
    return Call(cls, (or_input(p["in_channels"], xs[0][1]), p["out_channels"]), {
        "kernel_size": tuple(p["kernel_size"]), "stride": tuple(p["stride"]), "padding": tuple(p["padding"]),
        **extra, "dilation": tuple(p["dilation"]), "groups": p["groups"], "bias": p["bias"]})


@builder("Conv1d", example=Example((4, 9), {"out_channels": 6, "kernel_size": 3, "padding": 1, "groups": 2}))
def _conv1d(p: Params, xs: list[Shape]) -> Call:
    return _conv(nn.Conv1d, p, xs)


@builder("Conv2d", example=Example((4, 8, 8), {"out_channels": 6, "kernel_size": 3, "stride": 2, "groups": 2}))
def _conv2d(p: Params, xs: list[Shape]) -> Call:
    return _conv(nn.Conv2d, p, xs)


@builder("Conv3d", example=Example((2, 4, 5, 5), {"out_channels": 4, "kernel_size": [2, 3, 3], "padding": [0, 1, 1],
                                                  "groups": 2}))
def _conv3d(p: Params, xs: list[Shape]) -> Call:
    return _conv(nn.Conv3d, p, xs)


@builder("ConvTranspose2d", example=Example((4, 5, 5), {"out_channels": 3, "kernel_size": 2, "stride": 2,
                                                        "output_padding": 1}))
def _deconv(p: Params, xs: list[Shape]) -> Call:
    return _conv(nn.ConvTranspose2d, p, xs, output_padding=tuple(p["output_padding"]))


@flop_rule("Conv1d", "Conv2d", "Conv3d", "ConvTranspose2d", "StdConv2d")
def _conv_flops(p: Params, xs: list[Shape], out: Shape) -> int:
    x = xs[0]
    c_in = x[1]
    transposed = len(p.get("output_padding") or []) > 0
    if transposed:
        w = (c_in, p["out_channels"] // p["groups"], *p["kernel_size"])
    else:
        w = (p["out_channels"], c_in // p["groups"], *p["kernel_size"])
    return int(conv_flop_count(list(x), list(w), list(out), transposed=transposed))


_CONVS = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose2d)


@module_rule(*_CONVS)
def _import_conv(m: nn.Conv1d | nn.Conv2d | nn.Conv3d | nn.ConvTranspose2d, xs: list[fx.Node]) -> Mapped:
    if m.padding_mode != "zeros":
        raise Unmappable(f"padding_mode={m.padding_mode!r} (only zero padding maps)")
    params = {"in_channels": m.in_channels, "out_channels": m.out_channels, "kernel_size": list(m.kernel_size),
              "stride": list(m.stride), "padding": _padding(m), "dilation": list(m.dilation),
              "groups": m.groups, "bias": m.bias is not None}
    if isinstance(m, nn.ConvTranspose2d):
        params["output_padding"] = list(m.output_padding)
    kind = next(c.__name__ for c in type(m).__mro__ if c in _CONVS)
    return Mapped(kind, params, xs)  # a library's subclass imports as the torch layer it extends


def _padding(m: nn.Conv1d | nn.Conv2d | nn.Conv3d | nn.ConvTranspose2d) -> list[int]:
    """The padding as numbers: 'valid' is none; 'same' (stride 1) pads each side by half the dilated kernel's
    reach, which is the same convolution where that reach is even."""
    if not isinstance(m.padding, str):
        return list(m.padding)
    if m.padding == "valid":
        return [0] * len(m.kernel_size)
    reach = [d * (k - 1) for d, k in zip(m.dilation, m.kernel_size, strict=True)]
    if any(r % 2 for r in reach):
        raise Unmappable(f"padding='same' with kernel {list(m.kernel_size)} pads one side more than the other "
                         "(an odd kernel size keeps it even)")
    return [r // 2 for r in reach]


# ------------------------------------------------------------------ StdConv2d
class StdConv2d(nn.Conv2d):
    """A Conv2d whose filters are standardised in every forward, as timm's StdConv2d computes it (a batch norm
    over each filter's weights); ``scaled``: each then times a learned ``gain`` and ``gamma / sqrt(fan-in)``
    (timm's ScaledStdConv2d). Gradients reach the raw weights through the standardisation."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                 dilation: Any = 1, groups: int = 1, bias: bool = True, eps: float = 1e-6, scaled: bool = False,
                 gamma: float = 1.0) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride=stride, padding=padding, dilation=dilation,
                         groups=groups, bias=bias)
        self.eps, self.gamma = eps, gamma
        self.scale = gamma * self.weight[0].numel() ** -0.5  # gamma / sqrt(fan-in)
        self.gain = nn.Parameter(torch.ones(out_channels, 1, 1, 1)) if scaled else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = nn.functional.batch_norm(self.weight.reshape(1, self.out_channels, -1), None, None,
                              weight=(self.gain * self.scale).view(-1) if self.gain is not None else None,
                              training=True, momentum=0.0, eps=self.eps).reshape_as(self.weight)
        return nn.functional.conv2d(x, weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


@builder("StdConv2d", example=Example((4, 6, 6), {"out_channels": 6, "kernel_size": 3, "groups": 2, "scaled": True,
                                                  "gamma": 1.5}))
def _std_conv2d(p: Params, xs: list[Shape]) -> Call:
    return _conv(StdConv2d, p, xs, eps=p["eps"], scaled=p["scaled"], gamma=p["gamma"])


def std_conv_params(m: nn.Conv2d, eps: float, gain: torch.Tensor | None, gamma: float) -> dict[str, Any]:
    """A weight-standardised convolution's parameters."""
    if m.padding_mode != "zeros" or isinstance(m.padding, str):
        raise Unmappable(f"a standardised convolution with padding {m.padding!r}, mode {m.padding_mode!r}")
    return {"in_channels": m.in_channels, "out_channels": m.out_channels, "kernel_size": list(m.kernel_size),
            "stride": list(m.stride), "padding": list(m.padding), "dilation": list(m.dilation), "groups": m.groups,
            "bias": m.bias is not None, "eps": float(eps), "scaled": gain is not None,
            "gamma": float(gamma) if gain is not None else 1.0}


@module_rule(StdConv2d)
@library_rule("timm.layers.std_conv.StdConv2d", "timm.layers.std_conv.ScaledStdConv2d",
              "timm.layers.std_conv.StdConv2dSame", "timm.layers.std_conv.ScaledStdConv2dSame")
def _import_std_conv(m: Any, xs: list[fx.Node]) -> Mapped:
    if getattr(m, "same_pad", False):  # timm pads in forward by the input's size: the exported program's F.pad
        raise Unmappable("'SAME' padding computed from the input's size in forward")
    gain = getattr(m, "gain", None)  # timm keeps gamma / sqrt(fan-in) only: gamma read back from it
    gamma = m.gamma if isinstance(m, StdConv2d) else getattr(m, "scale", 1.0) * m.weight[0].numel() ** 0.5
    return Mapped("StdConv2d", std_conv_params(m, m.eps, gain, gamma), xs)
