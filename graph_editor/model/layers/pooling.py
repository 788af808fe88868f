"""Pooling layers."""

from __future__ import annotations

from ..catalog import Params, ParamSpec, Shape, fmt_shape, layer
from ..errors import ShapeError
from ._rules import conv_out, need_dim, need_rank

CAT = "Pooling"


def _pool_params(dilation: bool) -> list[ParamSpec]:
    params = [
        ParamSpec("kernel_size", "ints", [2, 2], "Window size.", minimum=1, length=2),
        ParamSpec("stride", "ints", None, "Step (empty: the kernel size).", minimum=1, length=2, optional=True),
        ParamSpec("padding", "ints", [0, 0], "Implicit padding on each side.", minimum=0, length=2),
        ParamSpec("ceil_mode", "bool", False, "Round the output size up instead of down."),
    ]
    if dilation:
        params.insert(3, ParamSpec("dilation", "ints", [1, 1], "Spacing of the window.", minimum=1, length=2))
        params.append(ParamSpec("same", "bool", False, "Pad like TensorFlow's 'SAME' (output = input / stride, rounded "
                                "up; the extra row and column at the bottom and right) with -inf, which no window "
                                "takes as its maximum; padding must be 0 (timm's MaxPool2dSame)."))
    else:
        params.append(ParamSpec("count_include_pad", "bool", True, "Count the zero padding in each window's "
                                "average (off: divide by the input elements the window covers)."))
    return params


def same_padding(size: int, kernel: int, stride: int, dilation: int = 1) -> int:
    """The total 'SAME' padding of one dim (TensorFlow's, timm's ``get_same_padding``): enough that the output
    is the input divided by the stride, rounded up."""
    return max((-(-size // stride) - 1) * stride + (kernel - 1) * dilation + 1 - size, 0)


def _pool(p: Params, xs: list[Shape]) -> Shape:
    (x,) = xs
    need_rank(x, 4, "CxHxW input")
    stride = p["stride"] or p["kernel_size"]
    dilation = p.get("dilation") or [1, 1]
    if p.get("same"):
        if any(p["padding"]):
            raise ShapeError("padding must be 0 with same: the 'SAME' padding is computed from the input",
                             field="padding")
        return (x[0], x[1], *(conv_out(x[2 + i] + same_padding(x[2 + i], p["kernel_size"][i], stride[i],
                                                                 dilation[i]), p["kernel_size"][i], stride[i], 0,
                                       dilation[i]) for i in range(2)))
    out = []
    for i in range(2):
        k, pad = p["kernel_size"][i], p["padding"][i]
        span = dilation[i] * (k - 1) + 1  # PyTorch checks the padding against the dilated window
        if pad * 2 > span:
            raise ShapeError(f"padding {pad} must be at most half the window size {span}")
        out.append(conv_out(x[2 + i], k, stride[i], pad, dilation[i], p["ceil_mode"]))
    if min(out) < 1:
        raise ShapeError(f"window {fmt_shape((0, *p['kernel_size']))} is larger than the input {fmt_shape(x)}")
    return (x[0], x[1], *out)


layer("MaxPool2d", CAT, "Maximum over each window.", _pool_params(True), prefix="pool",
      key_params=("kernel_size", "stride"))(_pool)
layer("AvgPool2d", CAT, "Average over each window.", _pool_params(False), prefix="pool",
      key_params=("kernel_size", "stride"))(_pool)


@layer("AdaptiveAvgPool2d", CAT, "Averages to a fixed output size whatever the input size.", [
    ParamSpec("output_size", "ints", [1, 1], "Output height and width.", minimum=1, length=2),
], prefix="avgpool", key_params=("output_size",))
def adaptive_avg_pool2d(p: Params, xs: list[Shape]) -> Shape:
    (x,) = xs
    need_rank(x, (3, 4), "CxHxW input")
    return (*x[:-2], *p["output_size"])


@layer("AvgPool1d", CAT, "Average over each window of a CxL sequence (Next-ViT's token reduction).", [
    ParamSpec("kernel_size", "int", 2, "Window length.", minimum=1),
    ParamSpec("stride", "int", None, "Step (empty: the kernel size).", minimum=1, optional=True),
    ParamSpec("padding", "int", 0, "Implicit zero padding on each end.", minimum=0),
    ParamSpec("ceil_mode", "bool", False, "Round the output length up instead of down."),
    ParamSpec("count_include_pad", "bool", True, "Count the zero padding in each window's average."),
], prefix="pool", key_params=("kernel_size", "stride"))
def avg_pool1d(p: Params, xs: list[Shape]) -> Shape:
    (x,) = xs
    need_rank(x, 3, "CxL input")
    k, pad = p["kernel_size"], p["padding"]
    if pad * 2 > k:
        raise ShapeError(f"padding {pad} must be at most half the window length {k}", field="padding")
    out = conv_out(x[2], k, p["stride"] or k, pad, 1, p["ceil_mode"])
    if out < 1:
        raise ShapeError(f"window {k} is longer than the input {fmt_shape(x)}")
    return (x[0], x[1], out)


@layer("BlurPool2d", CAT, "Blurs each channel with a fixed binomial filter, then subsamples (anti-aliased "
       "downsampling: TResNet, 'Making Convolutional Networks Shift-Invariant Again'); nothing learned.", [
           ParamSpec("channels", "int", None, "Channels (empty: taken from the input).", minimum=1, optional=True),
           ParamSpec("filt_size", "int", 3, "The binomial filter's size (3: [1, 2, 1] / 4 each way).", minimum=2),
           ParamSpec("stride", "int", 2, "Subsampling step.", minimum=1),
           ParamSpec("pad_mode", "choice", "reflect", "How the border is padded.",
                     choices=("reflect", "constant", "replicate", "circular")),
       ], prefix="blur", key_params=("filt_size", "stride"))
def blur_pool2d(p: Params, xs: list[Shape]) -> Shape:
    (x,) = xs
    need_rank(x, 4, "CxHxW input")
    need_dim(x, 1, p["channels"], "channels")
    k, s = p["filt_size"], p["stride"]
    pad = blur_padding(k, s)
    if p["pad_mode"] == "reflect" and min(x[2:]) <= pad:
        raise ShapeError(f"reflect padding {pad} needs an input larger than {pad}, receives {fmt_shape(x)}")
    out = [conv_out(x[2 + i], k, s, pad) for i in range(2)]
    if min(out) < 1:
        raise ShapeError(f"filter {k} is larger than the padded input {fmt_shape(x)}")
    return (x[0], x[1], *out)


def blur_padding(filt_size: int, stride: int) -> int:
    """The padding on each side of BlurPool2d (timm's ``get_padding(filt_size, stride)``)."""
    return ((stride - 1) + (filt_size - 1)) // 2
