"""Pooling layers: no FLOPs that ``FlopCounterMode`` counts."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import fx, nn
from torch.utils.flop_counter import conv_flop_count

from ...analysis.per_node import flop_rule, zero_flops
from ...importer.rules import (
    Mapped,
    Unmappable,
    const,
    function_rule,
    library_rule,
    module_rule,
    pair,
    tensor,
)
from ..modules import Call, Example, Params, Shape, builder, or_input

zero_flops("MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d")


def _window(p: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"kernel_size": tuple(p["kernel_size"]), "stride": tuple(p["stride"] or p["kernel_size"]),
            "padding": tuple(p["padding"]), **extra, "ceil_mode": p["ceil_mode"]}


def _stride(stride: Any, kernel_size: Any) -> list[int]:
    return pair(stride if stride not in (None, []) else kernel_size)


# ------------------------------------------------------------------ MaxPool2d
class MaxPool2dSame(nn.MaxPool2d):
    """MaxPool2d with TensorFlow's 'SAME' padding, computed from the input's size in forward: -inf (which no window
    takes as its maximum), the odd row and column at the bottom and right (timm's MaxPool2dSame)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pads = []
        for i in (-1, -2):  # width, then height: F.pad's order
            size, k, s, d = x.shape[i], self.kernel_size[i], self.stride[i], self.dilation[i]  # type: ignore[index]
            total = max((-(-size // s) - 1) * s + (k - 1) * d + 1 - size, 0)
            pads += [total // 2, total - total // 2]
        x = nn.functional.pad(x, pads, value=-float("inf"))
        return nn.functional.max_pool2d(x, self.kernel_size, self.stride, 0, self.dilation, self.ceil_mode)


@builder("MaxPool2d", example=Example((3, 7, 7), {"kernel_size": 3, "stride": 2, "padding": 1,
                                                  "ceil_mode": True}))
def _maxpool(p: Params, xs: list[Shape]) -> Call:
    return Call(MaxPool2dSame if p["same"] else nn.MaxPool2d, (), _window(p, dilation=tuple(p["dilation"])))


@module_rule(nn.MaxPool2d, MaxPool2dSame)
@library_rule("timm.layers.pool2d_same.MaxPool2dSame")
def _import_maxpool(m: nn.MaxPool2d, xs: list[fx.Node]) -> Mapped:
    if m.return_indices:
        raise Unmappable("MaxPool2d with return_indices=True")
    same = type(m).__name__ == "MaxPool2dSame"  # ours or timm's: the same forward
    if same and any(pair(m.padding)):
        raise Unmappable(f"'SAME' max pooling with padding {m.padding} as well")
    return Mapped("MaxPool2d", {"kernel_size": pair(m.kernel_size), "stride": _stride(m.stride, m.kernel_size),
                                "padding": pair(m.padding), "dilation": pair(m.dilation),
                                "ceil_mode": m.ceil_mode, "same": same}, xs)


@function_rule(F.max_pool2d)
def _f_maxpool(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
               ceil_mode: bool = False, return_indices: bool = False) -> Mapped:
    if return_indices:
        raise Unmappable("max_pool2d with return_indices=True")
    return Mapped("MaxPool2d", {"kernel_size": pair(kernel_size), "stride": _stride(stride, kernel_size),
                                "padding": pair(padding), "dilation": pair(dilation), "ceil_mode": ceil_mode},
                  [tensor(input)])


# ------------------------------------------------------------------ AvgPool2d
@builder("AvgPool2d", example=Example((3, 6, 6), {"kernel_size": 3, "stride": 1, "padding": 1,
                                                  "count_include_pad": False}))
def _avgpool(p: Params, xs: list[Shape]) -> Call:
    return Call(nn.AvgPool2d, (), _window(p, count_include_pad=p["count_include_pad"]))


def _avgpool_params(kernel_size: Any, stride: Any, padding: Any, ceil_mode: bool, count_include_pad: bool,
                    divisor_override: Any) -> dict[str, Any]:
    if divisor_override is not None:
        raise Unmappable(f"average pooling with divisor_override={divisor_override!r}")
    return {"kernel_size": pair(kernel_size), "stride": _stride(stride, kernel_size), "padding": pair(padding),
            "ceil_mode": bool(ceil_mode), "count_include_pad": bool(count_include_pad)}


@module_rule(nn.AvgPool2d)
def _import_avgpool(m: nn.AvgPool2d, xs: list[fx.Node]) -> Mapped:
    return Mapped("AvgPool2d", _avgpool_params(m.kernel_size, m.stride, m.padding, m.ceil_mode, m.count_include_pad,
                                               m.divisor_override), xs)


@function_rule(F.avg_pool2d)
def _f_avgpool(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: Any = None) -> Mapped:
    return Mapped("AvgPool2d", _avgpool_params(const(kernel_size, "kernel_size"), const(stride, "stride"),
                                               const(padding, "padding"), ceil_mode, count_include_pad,
                                               divisor_override), [tensor(input)])


# ------------------------------------------------------------------ AdaptiveAvgPool2d
@builder("AdaptiveAvgPool2d", example=Example((3, 5, 5), {"output_size": [2, 3]}))
def _adaptive(p: Params, xs: list[Shape]) -> Call:
    return Call(nn.AdaptiveAvgPool2d, (tuple(p["output_size"]),))


def _adaptive_params(size: Any, xs: list[fx.Node]) -> Mapped:
    if size is None or (not isinstance(size, int) and None in tuple(size)):
        raise Unmappable("adaptive pooling that keeps a dimension (None in output_size)")
    return Mapped("AdaptiveAvgPool2d", {"output_size": pair(size)}, xs)


@module_rule(nn.AdaptiveAvgPool2d)
def _import_adaptive(m: nn.AdaptiveAvgPool2d, xs: list[fx.Node]) -> Mapped:
    return _adaptive_params(m.output_size, xs)


@function_rule(F.adaptive_avg_pool2d)
def _f_adaptive(input: Any, output_size: Any) -> Mapped:
    return _adaptive_params(const(output_size, "output_size"), [tensor(input)])


# ------------------------------------------------------------------ AvgPool1d
@builder("AvgPool1d", example=Example((3, 9), {"kernel_size": 3, "stride": 2, "padding": 1,
                                               "count_include_pad": False}))
def _avgpool1d(p: Params, xs: list[Shape]) -> Call:
    return Call(nn.AvgPool1d, (p["kernel_size"],), {"stride": p["stride"] or p["kernel_size"], "padding": p["padding"],
                                                    "ceil_mode": p["ceil_mode"],
                                                    "count_include_pad": p["count_include_pad"]})


zero_flops("AvgPool1d")


@module_rule(nn.AvgPool1d)
def _import_avgpool1d(m: nn.AvgPool1d, xs: list[fx.Node]) -> Mapped:
    (k,), (s,), (pad,) = (v if isinstance(v, tuple) else (v,) for v in (m.kernel_size, m.stride or m.kernel_size,
                                                                          m.padding))
    return Mapped("AvgPool1d", {"kernel_size": int(k), "stride": int(s), "padding": int(pad),
                                "ceil_mode": bool(m.ceil_mode), "count_include_pad": bool(m.count_include_pad)}, xs)


# ------------------------------------------------------------------ BlurPool2d
class BlurPool2d(nn.Module):
    """Each channel padded, blurred by a fixed binomial filter and subsampled (timm's BlurPool2d, computed as it
    computes it); the filter is made here, not learned and not in the weights."""

    filt: torch.Tensor

    def __init__(self, channels: int, filt_size: int = 3, stride: int = 2, pad_mode: str = "reflect") -> None:
        super().__init__()
        self.channels, self.filt_size, self.stride, self.pad_mode = channels, filt_size, stride, pad_mode
        self.padding = [((stride - 1) + (filt_size - 1)) // 2] * 4
        row = [1]  # the binomial coefficients of filt_size - 1, Pascal's triangle row by row
        for _ in range(filt_size - 1):
            row = [a + b for a, b in zip([0, *row], [*row, 0], strict=True)]
        coeffs = torch.tensor(row, device="cpu", dtype=torch.float32) / (2 ** (filt_size - 1))
        blur = (coeffs[:, None] * coeffs[None, :])[None, None, :, :].repeat(channels, 1, 1, 1)
        self.register_buffer("filt", blur.to(torch.empty(0).device), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = nn.functional.pad(x, self.padding, mode=self.pad_mode)
        return nn.functional.conv2d(x, self.filt, stride=self.stride, groups=self.channels)

    def extra_repr(self) -> str:
        return f"{self.channels}, filt_size={self.filt_size}, stride={self.stride}, pad_mode={self.pad_mode!r}"


@builder("BlurPool2d", example=Example((3, 7, 7), {"filt_size": 4, "stride": 2}))
def _blurpool(p: Params, xs: list[Shape]) -> Call:
    return Call(BlurPool2d, (or_input(p["channels"], xs[0][1]),), {
        "filt_size": p["filt_size"], "stride": p["stride"], "pad_mode": p["pad_mode"]})


@flop_rule("BlurPool2d")
def _blurpool_flops(p: Params, xs: list[Shape], out: Shape) -> int:
    """The depthwise convolution's, as FlopCounterMode counts it (the padding counts none)."""
    x, k = xs[0], p["filt_size"]
    return int(conv_flop_count(list(x), [x[1], 1, k, k], list(out), transposed=False))


@module_rule(BlurPool2d)
@library_rule("timm.layers.blur_pool.BlurPool2d")
def _import_blurpool(m: Any, xs: list[fx.Node]) -> Mapped:
    if m.channels is None:
        raise Unmappable("BlurPool2d without channels (its filter expanded to the input's in forward)")
    return Mapped("BlurPool2d", {"channels": m.channels, "filt_size": m.filt_size, "stride": m.stride,
                                 "pad_mode": m.pad_mode}, xs)
