"""Normalisation layers."""

from __future__ import annotations

from ..catalog import Params, ParamSpec, Shape, fmt_shape, layer
from ..errors import ShapeError
from ._rules import need_dim, need_rank

CAT = "Normalisation"

_EPS = ParamSpec("eps", "float", 1e-5, "Added to the variance for stability.", minimum=0.0)
_BIAS = ParamSpec("bias", "bool", True, "Learn the shift too (off: the scale only, timm's *NoBias norms).")


# Batch norm refuses eps = 0 while training (the batch variance can be zero).
_BN_EPS = ParamSpec("eps", "float", 1e-5, "Added to the variance for stability.", minimum=1e-12)


def _bn_params() -> list[ParamSpec]:
    return [
        ParamSpec("num_features", "int", None, "Channels (empty: taken from the input).", minimum=1, optional=True),
        _BN_EPS,
        ParamSpec("momentum", "float", 0.1, "Running statistics update rate.", minimum=0.0, maximum=1.0),
        ParamSpec("affine", "bool", True, "Learn a scale and shift."),
    ]


@layer("BatchNorm1d", CAT, "Batch normalisation over features (N x C or N x C x L).", _bn_params(),
       prefix="bn")
def batchnorm1d(p: Params, xs: list[Shape]) -> Shape:
    (x,) = xs
    need_rank(x, (2, 3), "C or CxL input")
    need_dim(x, 1, p["num_features"], "features")
    return x


@layer("BatchNorm2d", CAT, "Batch normalisation over the channels of an image.", _bn_params(), prefix="bn")
def batchnorm2d(p: Params, xs: list[Shape]) -> Shape:
    return _per_channel(p, xs, "num_features")


def _per_channel(p: Params, xs: list[Shape], channels: str) -> Shape:
    """A norm of each channel (or each position's channels) of an image: the shape kept."""
    (x,) = xs
    need_rank(x, 4, "CxHxW input")
    need_dim(x, 1, p[channels], "channels")
    return x


@layer("LayerNorm", CAT, "Normalises over the trailing dimensions of each sample.", [
    ParamSpec("normalized_shape", "ints", None, "Trailing dims to normalise (empty: the last one).",
              minimum=1, optional=True),
    _EPS,
    ParamSpec("elementwise_affine", "bool", True, "Learn a scale and shift."),
    _BIAS,
], prefix="ln")
def layernorm(p: Params, xs: list[Shape]) -> Shape:
    return _trailing(p, xs)


def _trailing(p: Params, xs: list[Shape]) -> Shape:
    """A norm over the trailing ``normalized_shape`` of each sample: the shape kept."""
    (x,) = xs
    shape = p["normalized_shape"]
    if shape and tuple(x[-len(shape):]) != tuple(shape):
        raise ShapeError(f"expects trailing dims {fmt_shape((0, *shape))}, receives {fmt_shape(x)}")
    if len(x) < 2:
        raise ShapeError("expects at least a 1-D input per sample")
    return x


@layer("LayerNorm2d", CAT, "Normalises the channels at each position of an image (ConvNeXt's LayerNorm on NCHW).", [
    ParamSpec("num_channels", "int", None, "Channels (empty: taken from the input).", minimum=1, optional=True),
    ParamSpec("eps", "float", 1e-6, "Added to the variance for stability.", minimum=0.0),
    ParamSpec("elementwise_affine", "bool", True, "Learn a scale and shift per channel."),
    _BIAS,
], prefix="ln")
def layernorm2d(p: Params, xs: list[Shape]) -> Shape:
    return _per_channel(p, xs, "num_channels")


@layer("GroupNorm", CAT, "Normalises groups of channels of each sample.", [
    ParamSpec("num_groups", "int", 8, "Number of channel groups.", minimum=1),
    ParamSpec("num_channels", "int", None, "Channels (empty: taken from the input).", minimum=1, optional=True),
    _EPS,
    ParamSpec("affine", "bool", True, "Learn a scale and shift."),
    _BIAS,
], prefix="gn", key_params=("num_groups",))
def groupnorm(p: Params, xs: list[Shape]) -> Shape:
    (x,) = xs
    if len(x) < 2:
        raise ShapeError("expects channels")
    c = need_dim(x, 1, p["num_channels"], "channels")
    if c % p["num_groups"]:
        raise ShapeError(f"num_groups {p['num_groups']} must divide the {c} channels")
    return x


@layer("Normalize", CAT, "Divides each vector along a dim by its p-norm (F.normalize): unit length, nothing "
       "learned (cosine attention: XCiT, SwiftFormer).", [
           ParamSpec("p", "float", 2.0, "The norm's exponent (2: Euclidean length).", minimum=0.0),
           ParamSpec("dim", "int", -1, "The dim whose vectors are normalised (batch is 0)."),
           ParamSpec("eps", "float", 1e-12, "The smallest norm divided by.", minimum=0.0),
       ], prefix="normalize", key_params=("p", "dim"))
def normalize(p: Params, xs: list[Shape]) -> Shape:
    (x,) = xs
    if len(x) < 2:
        raise ShapeError("expects at least a 1-D input per sample")
    if not -len(x) <= p["dim"] < len(x) or p["dim"] % len(x) == 0:
        raise ShapeError(f"cannot normalise along dim {p['dim']} of {fmt_shape(x, batch=True)}: it is the batch "
                         "or out of range", field="dim")
    return x


_DIVIDE_BY = ParamSpec("divide_by", "choice", "rms", "'rms': the root mean square (RMSNorm); 'std': the standard "
                       "deviation, the mean not subtracted (timm's SimpleNorm).", choices=("rms", "std"))


@layer("RMSNorm", CAT, "Divides each sample's trailing dims by their root mean square, no mean subtracted (Llama, "
       "Gemma, timm's RmsNorm); scale only.", [
           ParamSpec("normalized_shape", "ints", None, "Trailing dims to normalise (empty: the last one).",
                     minimum=1, optional=True),
           ParamSpec("eps", "float", 1e-6, "Added to the mean square for stability.", minimum=0.0),
           ParamSpec("elementwise_affine", "bool", True, "Learn a scale."),
           _DIVIDE_BY,
       ], prefix="rms")
def rmsnorm(p: Params, xs: list[Shape]) -> Shape:
    return _trailing(p, xs)


@layer("RMSNorm2d", CAT, "RMSNorm over the channels at each position of an image (timm's RmsNorm2d, SimpleNorm2d; "
       "MobileNetV5, ConvNeXt-RMS).", [
           ParamSpec("num_channels", "int", None, "Channels (empty: taken from the input).", minimum=1,
                     optional=True),
           ParamSpec("eps", "float", 1e-6, "Added to the mean square for stability.", minimum=0.0),
           ParamSpec("elementwise_affine", "bool", True, "Learn a scale per channel."),
           _DIVIDE_BY,
       ], prefix="rms")
def rmsnorm2d(p: Params, xs: list[Shape]) -> Shape:
    return _per_channel(p, xs, "num_channels")
