"""Convolutions: Conv1d, Conv2d (groups, so depthwise too), Conv3d and ConvTranspose2d."""

from __future__ import annotations

from ..catalog import Params, ParamSpec, Shape, fmt_shape, layer
from ..errors import ShapeError
from ._rules import conv_out, need_dim, need_rank

CAT = "Convolution"


def _conv_params(n: int, transpose: bool = False) -> list[ParamSpec]:
    params = [
        ParamSpec("in_channels", "int", None, "Input channels (empty: taken from the input).", minimum=1, optional=True),
        ParamSpec("out_channels", "int", 16, "Output channels (filters).", minimum=1),
        ParamSpec("kernel_size", "ints", [3] * n, "Kernel size.", minimum=1, length=n),
        ParamSpec("stride", "ints", [1] * n, "Stride.", minimum=1, length=n),
        ParamSpec("padding", "ints", [0] * n, "Zero padding on each side.", minimum=0, length=n),
    ]
    if transpose:
        params.append(ParamSpec("output_padding", "ints", [0] * n, "Extra size added to one side of the output.",
                                minimum=0, length=n))
    params += [
        ParamSpec("dilation", "ints", [1] * n, "Spacing between kernel elements.", minimum=1, length=n),
        ParamSpec("groups", "int", 1, "Blocked connections; groups = channels makes it depthwise.", minimum=1),
        ParamSpec("bias", "bool", True, "Learn an additive bias."),
    ]
    return params


def _channels(p: Params, x: Shape) -> int:
    c_in = need_dim(x, 1, p["in_channels"], "input channels")
    g = p["groups"]
    if c_in % g or p["out_channels"] % g:
        raise ShapeError(f"groups={g} must divide both input channels ({c_in}) and out_channels ({p['out_channels']})")
    return c_in


def _conv(p: Params, x: Shape, n: int) -> Shape:
    need_rank(x, n + 2, f"{('CxL', 'CxHxW', 'CxDxHxW')[n - 1]} input")
    _channels(p, x)
    spatial = [
        conv_out(x[2 + i], p["kernel_size"][i], p["stride"][i], p["padding"][i], p["dilation"][i]) for i in range(n)
    ]
    if min(spatial) < 1:
        raise ShapeError(f"kernel {fmt_shape((0, *p['kernel_size']))} is larger than the padded input "
                         f"{fmt_shape(x[1:], batch=True)}: the output would be empty")
    return (x[0], p["out_channels"], *spatial)


@layer("Conv1d", CAT, "1-D convolution over a CxL sequence.", _conv_params(1), prefix="conv",
       key_params=("out_channels", "kernel_size", "stride"))
def conv1d(p: Params, xs: list[Shape]) -> Shape:
    return _conv(p, xs[0], 1)


@layer("Conv2d", CAT, "2-D convolution over a CxHxW image; groups=channels is depthwise.", _conv_params(2),
       prefix="conv", key_params=("out_channels", "kernel_size", "stride", "groups"))
def conv2d(p: Params, xs: list[Shape]) -> Shape:
    return _conv(p, xs[0], 2)


@layer("Conv3d", CAT, "3-D convolution over a CxDxHxW volume (video, medical scans).", _conv_params(3),
       prefix="conv", key_params=("out_channels", "kernel_size", "stride", "groups"))
def conv3d(p: Params, xs: list[Shape]) -> Shape:
    return _conv(p, xs[0], 3)


@layer("ConvTranspose2d", CAT, "Transposed 2-D convolution (learned upsampling).", _conv_params(2, transpose=True),
       prefix="deconv", key_params=("out_channels", "kernel_size", "stride"))
def conv_transpose2d(p: Params, xs: list[Shape]) -> Shape:
    (x,) = xs
    need_rank(x, 4, "CxHxW input")
    _channels(p, x)
    out = []
    for i in range(2):
        s, k, pad, op, d = (p["stride"][i], p["kernel_size"][i], p["padding"][i], p["output_padding"][i],
                            p["dilation"][i])
        if op >= max(s, d):
            raise ShapeError(f"output_padding {op} must be smaller than stride or dilation")
        out.append((x[2 + i] - 1) * s - 2 * pad + d * (k - 1) + op + 1)
    if min(out) < 1:
        raise ShapeError("padding is too large: the output would be empty")
    return (x[0], p["out_channels"], *out)


@layer("StdConv2d", CAT, "2-D convolution whose filters are standardised (zero mean, unit variance each) in every "
       "forward, so it trains as BiT's and NF-Net's do (timm's StdConv2d, ScaledStdConv2d).", [
           *_conv_params(2),
           # its standardisation is a batch norm, whose eps must be positive (0 failed in the forward, not here)
           ParamSpec("eps", "float", 1e-6, "Added to each filter's variance.", minimum=1e-12),
           ParamSpec("scaled", "bool", False, "Then scale each filter by a learned gain times gamma / sqrt(fan-in) "
                     "(NF-Net's ScaledStdConv2d)."),
           ParamSpec("gamma", "float", 1.0, "The scaled filters' factor (the activation's gain in NF-Nets).",
                     minimum=0.0),
       ], prefix="conv", key_params=("out_channels", "kernel_size", "stride"))
def std_conv2d(p: Params, xs: list[Shape]) -> Shape:
    return _conv(p, xs[0], 2)
