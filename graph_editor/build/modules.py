"""How each catalog layer becomes a ``torch.nn.Module``: one builder per layer type.

A builder gets the node's checked parameters and the inferred input shapes (batch first),
so parameters left empty ("take it from the input") are filled in here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import nn

from . import layers as L

Builder = Callable[[dict[str, Any], list[tuple[int, ...]]], nn.Module]
_BUILDERS: dict[str, Builder] = {}

# Layer types that the fx graph expresses without a module.
NO_MODULE = frozenset({"Input", "Output"})


def builder(*types: str) -> Callable[[Builder], Builder]:
    def deco(fn: Builder) -> Builder:
        for t in types:
            if t in _BUILDERS:
                raise ValueError(f"a builder for {t!r} is already registered")
            _BUILDERS[t] = fn
        return fn
    return deco


def get_builder(type_: str) -> Builder | None:
    return _BUILDERS.get(type_)


def builder_types() -> set[str]:
    return set(_BUILDERS) | NO_MODULE


def _or(value: Any, fallback: Any) -> Any:
    return fallback if value is None else value


@builder("Linear")
def _linear(p, xs):
    return nn.Linear(_or(p["in_features"], xs[0][-1]), p["out_features"], bias=p["bias"])


def _conv_kwargs(p, xs) -> dict[str, Any]:
    return dict(in_channels=_or(p["in_channels"], xs[0][1]), out_channels=p["out_channels"],
                kernel_size=tuple(p["kernel_size"]), stride=tuple(p["stride"]), padding=tuple(p["padding"]),
                dilation=tuple(p["dilation"]), groups=p["groups"], bias=p["bias"])


@builder("Conv1d")
def _conv1d(p, xs):
    return nn.Conv1d(**_conv_kwargs(p, xs))


@builder("Conv2d")
def _conv2d(p, xs):
    return nn.Conv2d(**_conv_kwargs(p, xs))


@builder("ConvTranspose2d")
def _deconv(p, xs):
    return nn.ConvTranspose2d(**_conv_kwargs(p, xs), output_padding=tuple(p["output_padding"]))


def _bn_kwargs(p, xs) -> dict[str, Any]:
    return dict(num_features=_or(p["num_features"], xs[0][1]), eps=p["eps"], momentum=p["momentum"],
                affine=p["affine"])


@builder("BatchNorm1d")
def _bn1d(p, xs):
    return nn.BatchNorm1d(**_bn_kwargs(p, xs))


@builder("BatchNorm2d")
def _bn2d(p, xs):
    return nn.BatchNorm2d(**_bn_kwargs(p, xs))


@builder("LayerNorm")
def _ln(p, xs):
    return nn.LayerNorm(tuple(_or(p["normalized_shape"], [xs[0][-1]])), eps=p["eps"],
                        elementwise_affine=p["elementwise_affine"])


@builder("GroupNorm")
def _gn(p, xs):
    return nn.GroupNorm(p["num_groups"], _or(p["num_channels"], xs[0][1]), eps=p["eps"], affine=p["affine"])


_SIMPLE = {"ReLU": nn.ReLU, "ReLU6": nn.ReLU6, "SiLU": nn.SiLU, "Hardswish": nn.Hardswish, "Sigmoid": nn.Sigmoid,
           "Tanh": nn.Tanh, "Identity": nn.Identity, "Add": L.Add, "Multiply": L.Multiply}


def _no_params(cls: type[nn.Module]) -> Builder:
    return lambda p, xs: cls()


for _t, _cls in _SIMPLE.items():
    builder(_t)(_no_params(_cls))


@builder("LeakyReLU")
def _leaky(p, xs):
    return nn.LeakyReLU(p["negative_slope"])


@builder("GELU")
def _gelu(p, xs):
    return nn.GELU(approximate=p["approximate"])


@builder("Softmax")
def _softmax(p, xs):
    return nn.Softmax(dim=p["dim"])


@builder("LogSoftmax")
def _logsoftmax(p, xs):
    return nn.LogSoftmax(dim=p["dim"])


def _pool_kwargs(p) -> dict[str, Any]:
    return dict(kernel_size=tuple(p["kernel_size"]), stride=tuple(p["stride"] or p["kernel_size"]),
                padding=tuple(p["padding"]), ceil_mode=p["ceil_mode"])


@builder("MaxPool2d")
def _maxpool(p, xs):
    return nn.MaxPool2d(**_pool_kwargs(p), dilation=tuple(p["dilation"]))


@builder("AvgPool2d")
def _avgpool(p, xs):
    return nn.AvgPool2d(**_pool_kwargs(p))


@builder("AdaptiveAvgPool2d")
def _adaptive(p, xs):
    return nn.AdaptiveAvgPool2d(tuple(p["output_size"]))


@builder("Dropout")
def _dropout(p, xs):
    return nn.Dropout(p["p"])


@builder("Dropout2d")
def _dropout2d(p, xs):
    return nn.Dropout2d(p["p"])


@builder("Flatten")
def _flatten(p, xs):
    return nn.Flatten(p["start_dim"], p["end_dim"])


@builder("Reshape")
def _reshape(p, xs):
    return L.Reshape(p["shape"])


@builder("Permute")
def _permute(p, xs):
    return L.Permute(p["dims"])


@builder("SelectToken")
def _select(p, xs):
    return L.SelectToken(p["index"])


@builder("Concat")
def _concat(p, xs):
    return L.Concat(p["dim"])


@builder("Embedding")
def _embedding(p, xs):
    return L.TabularEmbedding(p["num_embeddings"], p["embedding_dim"], p["columns"])


@builder("MultiheadAttention")
def _mha(p, xs):
    return L.SelfAttention(_or(p["embed_dim"], xs[0][-1]), p["num_heads"], p["dropout"], p["bias"])


@builder("TransformerEncoderLayer")
def _encoder(p, xs):
    return nn.TransformerEncoderLayer(
        _or(p["d_model"], xs[0][-1]), p["nhead"], p["dim_feedforward"], p["dropout"], activation=p["activation"],
        layer_norm_eps=p["layer_norm_eps"], batch_first=True, norm_first=p["norm_first"])


@builder("PatchEmbed")
def _patch(p, xs):
    return L.PatchEmbed(_or(p["in_channels"], xs[0][1]), p["embed_dim"], p["patch_size"])


@builder("ClassTokenPosEmbed")
def _clspos(p, xs):
    return L.ClassTokenPosEmbed(_or(p["num_tokens"], xs[0][1]), _or(p["embed_dim"], xs[0][2]), p["class_token"],
                                p["dropout"])
