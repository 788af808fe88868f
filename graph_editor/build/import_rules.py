"""What a traced ``torch.fx`` node becomes in the catalog: one small rule per module type or op.

A module rule reads the module's attributes; a function rule has the signature of the torch
function it stands for, so fx's positional and keyword arguments bind to it exactly as they
did to torch. A rule returns a :class:`Mapped` layer, or raises :class:`Unmappable` with
the reason (e.g. ``padding_mode='reflect'``). Adding support for an op is one entry here.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import fx, nn

from . import layers as L


class Unmappable(Exception):
    """This node has no catalog equivalent; the message says why."""


@dataclass
class Mapped:
    """A catalog layer for one fx node: its type, parameters and tensor inputs, in order.

    ``prefix`` is where the module's state_dict keys go inside the built module (the
    catalog's Embedding wraps ``nn.Embedding`` as ``.embedding``, for instance).
    """

    type: str
    params: dict[str, Any] = field(default_factory=dict)
    inputs: list[fx.Node] = field(default_factory=list)
    prefix: str = ""


ModuleRule = Callable[[nn.Module, list[fx.Node]], Mapped]
MODULE_RULES: dict[type[nn.Module], ModuleRule] = {}
FUNCTION_RULES: dict[Any, Callable[..., Mapped]] = {}
METHOD_RULES: dict[str, Callable[..., Mapped]] = {}

# Our own layer classes are leaves when tracing, so a built graph imports back as itself.
LEAF_CLASSES: tuple[type[nn.Module], ...] = (L.Add, L.Multiply, L.Concat, L.Reshape, L.Permute, L.SelectToken,
                                             L.TabularEmbedding, L.SelfAttention, L.PatchEmbed,
                                             L.ClassTokenPosEmbed)


def module_rule(*classes: type[nn.Module]) -> Callable[[ModuleRule], ModuleRule]:
    def deco(fn: ModuleRule) -> ModuleRule:
        for c in classes:
            MODULE_RULES[c] = fn
        return fn
    return deco


def function_rule(*targets: Any, methods: tuple[str, ...] = ()) -> Callable[[Callable[..., Mapped]],
                                                                             Callable[..., Mapped]]:
    def deco(fn: Callable[..., Mapped]) -> Callable[..., Mapped]:
        for t in targets:
            FUNCTION_RULES[t] = fn
        for m in methods:
            METHOD_RULES[m] = fn
        return fn
    return deco


def _pair(v: Any) -> list[int]:
    return [int(v), int(v)] if isinstance(v, int) else [int(x) for x in v]


def _tensor(x: Any, what: str = "input") -> fx.Node:
    if not isinstance(x, fx.Node):
        raise Unmappable(f"its {what} is a constant ({x!r}), not a tensor")
    return x


def _const(value: Any, name: str) -> Any:
    if isinstance(value, fx.Node):
        raise Unmappable(f"{name} is computed at run time; only constants map to a layer parameter")
    return value


# ------------------------------------------------------------------ modules
@module_rule(nn.Linear)
def _linear(m: nn.Linear, xs: list[fx.Node]) -> Mapped:
    return Mapped("Linear", {"in_features": m.in_features, "out_features": m.out_features,
                             "bias": m.bias is not None}, xs)


@module_rule(nn.Conv1d, nn.Conv2d, nn.ConvTranspose2d)
def _conv(m: nn.Conv1d | nn.Conv2d | nn.ConvTranspose2d, xs: list[fx.Node]) -> Mapped:
    if m.padding_mode != "zeros":
        raise Unmappable(f"padding_mode={m.padding_mode!r} (only zero padding maps)")
    if isinstance(m.padding, str):
        raise Unmappable(f"padding={m.padding!r} (give the padding as numbers)")
    params = {"in_channels": m.in_channels, "out_channels": m.out_channels, "kernel_size": list(m.kernel_size),
              "stride": list(m.stride), "padding": list(m.padding), "dilation": list(m.dilation),
              "groups": m.groups, "bias": m.bias is not None}
    if isinstance(m, nn.ConvTranspose2d):
        params["output_padding"] = list(m.output_padding)
    return Mapped(type(m).__name__, params, xs)


@module_rule(nn.BatchNorm1d, nn.BatchNorm2d)
def _bn(m: nn.BatchNorm1d | nn.BatchNorm2d, xs: list[fx.Node]) -> Mapped:
    if not m.track_running_stats or m.momentum is None:
        raise Unmappable("BatchNorm without running statistics or with a cumulative average (momentum=None)")
    return Mapped(type(m).__name__, {"num_features": m.num_features, "eps": m.eps, "momentum": m.momentum,
                                     "affine": m.affine}, xs)


@module_rule(nn.LayerNorm)
def _ln(m: nn.LayerNorm, xs: list[fx.Node]) -> Mapped:
    if m.elementwise_affine and getattr(m, "bias", True) is None:
        raise Unmappable("LayerNorm with bias=False")
    return Mapped("LayerNorm", {"normalized_shape": list(m.normalized_shape), "eps": m.eps,
                                "elementwise_affine": m.elementwise_affine}, xs)


@module_rule(nn.GroupNorm)
def _gn(m: nn.GroupNorm, xs: list[fx.Node]) -> Mapped:
    return Mapped("GroupNorm", {"num_groups": m.num_groups, "num_channels": m.num_channels, "eps": m.eps,
                                "affine": m.affine}, xs)


_PLAIN = {nn.ReLU: "ReLU", nn.ReLU6: "ReLU6", nn.SiLU: "SiLU", nn.Hardswish: "Hardswish", nn.Sigmoid: "Sigmoid",
          nn.Tanh: "Tanh", nn.Identity: "Identity", L.Add: "Add", L.Multiply: "Multiply"}


def _plain(type_: str) -> ModuleRule:
    return lambda m, xs: Mapped(type_, {}, xs)


for _cls, _type in _PLAIN.items():
    module_rule(_cls)(_plain(_type))


@module_rule(nn.LeakyReLU)
def _leaky(m: nn.LeakyReLU, xs: list[fx.Node]) -> Mapped:
    return Mapped("LeakyReLU", {"negative_slope": m.negative_slope}, xs)


@module_rule(nn.GELU)
def _gelu(m: nn.GELU, xs: list[fx.Node]) -> Mapped:
    return Mapped("GELU", {"approximate": m.approximate}, xs)


@module_rule(nn.Softmax, nn.LogSoftmax)
def _softmax(m: nn.Softmax | nn.LogSoftmax, xs: list[fx.Node]) -> Mapped:
    if m.dim is None:
        raise Unmappable(f"{type(m).__name__} without dim")
    return Mapped(type(m).__name__, {"dim": m.dim}, xs)


@module_rule(nn.MaxPool2d)
def _maxpool(m: nn.MaxPool2d, xs: list[fx.Node]) -> Mapped:
    if m.return_indices:
        raise Unmappable("MaxPool2d with return_indices=True")
    return Mapped("MaxPool2d", {"kernel_size": _pair(m.kernel_size), "stride": _pair(m.stride or m.kernel_size),
                                "padding": _pair(m.padding), "dilation": _pair(m.dilation),
                                "ceil_mode": m.ceil_mode}, xs)


@module_rule(nn.AvgPool2d)
def _avgpool(m: nn.AvgPool2d, xs: list[fx.Node]) -> Mapped:
    if not m.count_include_pad or m.divisor_override is not None:
        raise Unmappable("AvgPool2d with count_include_pad=False or a divisor_override")
    return Mapped("AvgPool2d", {"kernel_size": _pair(m.kernel_size), "stride": _pair(m.stride or m.kernel_size),
                                "padding": _pair(m.padding), "ceil_mode": m.ceil_mode}, xs)


@module_rule(nn.AdaptiveAvgPool2d)
def _adaptive(m: nn.AdaptiveAvgPool2d, xs: list[fx.Node]) -> Mapped:
    return _adaptive_params(m.output_size, xs)


def _adaptive_params(size: Any, xs: list[fx.Node]) -> Mapped:
    if size is None or (not isinstance(size, int) and None in tuple(size)):
        raise Unmappable("adaptive pooling that keeps a dimension (None in output_size)")
    return Mapped("AdaptiveAvgPool2d", {"output_size": _pair(size)}, xs)


@module_rule(nn.Dropout, nn.Dropout2d)
def _dropout(m: nn.Dropout | nn.Dropout2d, xs: list[fx.Node]) -> Mapped:
    return Mapped(type(m).__name__, {"p": m.p}, xs)


@module_rule(nn.Flatten)
def _flatten(m: nn.Flatten, xs: list[fx.Node]) -> Mapped:
    return Mapped("Flatten", {"start_dim": m.start_dim, "end_dim": m.end_dim}, xs)


@module_rule(nn.Embedding)
def _embedding(m: nn.Embedding, xs: list[fx.Node]) -> Mapped:
    if m.max_norm is not None:
        raise Unmappable("Embedding with max_norm (it rescales weights in the forward pass)")
    return Mapped("Embedding", {"num_embeddings": m.num_embeddings, "embedding_dim": m.embedding_dim}, xs,
                  prefix="embedding.")


@module_rule(nn.TransformerEncoderLayer)
def _encoder(m: nn.TransformerEncoderLayer, xs: list[fx.Node]) -> Mapped:
    if not m.self_attn.batch_first:
        raise Unmappable("TransformerEncoderLayer with batch_first=False (the catalog's sequences are batch first)")
    if m.activation_relu_or_gelu not in (1, 2):
        raise Unmappable("TransformerEncoderLayer with an activation other than relu or gelu")
    if m.linear1.bias is None:
        raise Unmappable("TransformerEncoderLayer with bias=False")
    return Mapped("TransformerEncoderLayer", {
        "d_model": m.self_attn.embed_dim, "nhead": m.self_attn.num_heads, "dim_feedforward": m.linear1.out_features,
        "dropout": m.dropout.p, "activation": "relu" if m.activation_relu_or_gelu == 1 else "gelu",
        "layer_norm_eps": m.norm1.eps, "norm_first": m.norm_first}, xs)


def mha(m: nn.MultiheadAttention, q: Any, k: Any, v: Any, key_padding_mask: Any = None, need_weights: bool = True,
        attn_mask: Any = None, average_attn_weights: bool = True, is_causal: bool = False) -> Mapped:
    """``nn.MultiheadAttention`` as self-attention: ``attn(x, x, x)[0]`` becomes one node."""
    if not (q is k is v):
        raise Unmappable("MultiheadAttention that is not self-attention (query, key and value differ)")
    if key_padding_mask is not None or attn_mask is not None or is_causal:
        raise Unmappable("MultiheadAttention with a mask")
    if not m.batch_first or not m._qkv_same_embed_dim or m.bias_k is not None or m.add_zero_attn:
        raise Unmappable("MultiheadAttention with batch_first=False, kdim/vdim, add_bias_kv or add_zero_attn")
    return Mapped("MultiheadAttention", {"embed_dim": m.embed_dim, "num_heads": m.num_heads, "dropout": m.dropout,
                                         "bias": m.in_proj_bias is not None}, [_tensor(q)], prefix="attn.")


@module_rule(L.Concat)
def _concat_mod(m: L.Concat, xs: list[fx.Node]) -> Mapped:
    return Mapped("Concat", {"dim": m.dim}, xs)


@module_rule(L.Reshape)
def _reshape_mod(m: L.Reshape, xs: list[fx.Node]) -> Mapped:
    return Mapped("Reshape", {"shape": list(m.shape)}, xs)


@module_rule(L.Permute)
def _permute_mod(m: L.Permute, xs: list[fx.Node]) -> Mapped:
    return Mapped("Permute", {"dims": list(m.dims)}, xs)


@module_rule(L.SelectToken)
def _select_mod(m: L.SelectToken, xs: list[fx.Node]) -> Mapped:
    return Mapped("SelectToken", {"index": m.index}, xs)


@module_rule(L.TabularEmbedding)
def _tab_embedding(m: L.TabularEmbedding, xs: list[fx.Node]) -> Mapped:
    e = m.embedding
    return Mapped("Embedding", {"num_embeddings": e.num_embeddings, "embedding_dim": e.embedding_dim,
                                "columns": m.columns}, xs)


@module_rule(L.SelfAttention)
def _self_attention(m: L.SelfAttention, xs: list[fx.Node]) -> Mapped:
    a = m.attn
    return Mapped("MultiheadAttention", {"embed_dim": a.embed_dim, "num_heads": a.num_heads, "dropout": a.dropout,
                                         "bias": a.in_proj_bias is not None}, xs)


@module_rule(L.PatchEmbed)
def _patch(m: L.PatchEmbed, xs: list[fx.Node]) -> Mapped:
    return Mapped("PatchEmbed", {"in_channels": m.proj.in_channels, "embed_dim": m.proj.out_channels,
                                 "patch_size": m.proj.kernel_size[0]}, xs)


@module_rule(L.ClassTokenPosEmbed)
def _cls_pos(m: L.ClassTokenPosEmbed, xs: list[fx.Node]) -> Mapped:
    extra = 1 if m.cls_token is not None else 0
    return Mapped("ClassTokenPosEmbed", {"num_tokens": m.pos_embed.shape[1] - extra, "embed_dim": m.pos_embed.shape[2],
                                         "class_token": bool(extra), "dropout": m.dropout.p}, xs)


# ------------------------------------------------------------------ functions and methods
def _unary(type_: str) -> Callable[..., Mapped]:
    return lambda input, *args, inplace=False, **kwargs: Mapped(type_, {}, [_tensor(input)])


for _type, _targets, _methods in [
    ("ReLU", (F.relu, torch.relu, F.relu_, torch.relu_), ("relu", "relu_")),
    ("ReLU6", (F.relu6,), ()),
    ("SiLU", (F.silu,), ()),
    ("Hardswish", (F.hardswish,), ()),
    ("Sigmoid", (torch.sigmoid, F.sigmoid), ("sigmoid",)),
    ("Tanh", (torch.tanh, F.tanh), ("tanh",)),
]:
    function_rule(*_targets, methods=_methods)(_unary(_type))


@function_rule(F.leaky_relu)
def _f_leaky(input: Any, negative_slope: float = 0.01, inplace: bool = False) -> Mapped:
    return Mapped("LeakyReLU", {"negative_slope": _const(negative_slope, "negative_slope")}, [_tensor(input)])


@function_rule(F.gelu)
def _f_gelu(input: Any, approximate: str = "none") -> Mapped:
    return Mapped("GELU", {"approximate": _const(approximate, "approximate")}, [_tensor(input)])


def _softmax_fn(type_: str) -> Callable[..., Mapped]:
    def rule(input: Any, dim: Any = None, _stacklevel: int = 3, dtype: Any = None) -> Mapped:
        if dim is None or dtype is not None:
            raise Unmappable(f"{type_.lower()} needs an explicit dim and no dtype")
        return Mapped(type_, {"dim": _const(dim, "dim")}, [_tensor(input)])
    return rule


function_rule(F.softmax, torch.softmax, methods=("softmax",))(_softmax_fn("Softmax"))
function_rule(F.log_softmax, torch.log_softmax, methods=("log_softmax",))(_softmax_fn("LogSoftmax"))


@function_rule(F.dropout)
def _f_dropout(input: Any, p: float = 0.5, training: bool = True, inplace: bool = False) -> Mapped:
    return Mapped("Dropout", {"p": _const(p, "p")}, [_tensor(input)])


@function_rule(F.adaptive_avg_pool2d)
def _f_adaptive(input: Any, output_size: Any) -> Mapped:
    return _adaptive_params(_const(output_size, "output_size"), [_tensor(input)])


@function_rule(F.max_pool2d)
def _f_maxpool(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
               ceil_mode: bool = False, return_indices: bool = False) -> Mapped:
    if return_indices:
        raise Unmappable("max_pool2d with return_indices=True")
    stride = stride if stride not in (None, []) else kernel_size
    return Mapped("MaxPool2d", {"kernel_size": _pair(kernel_size), "stride": _pair(stride), "padding": _pair(padding),
                                "dilation": _pair(dilation), "ceil_mode": ceil_mode}, [_tensor(input)])


@function_rule(F.avg_pool2d)
def _f_avgpool(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: Any = None) -> Mapped:
    if not count_include_pad or divisor_override is not None:
        raise Unmappable("avg_pool2d with count_include_pad=False or a divisor_override")
    stride = stride if stride not in (None, []) else kernel_size
    return Mapped("AvgPool2d", {"kernel_size": _pair(kernel_size), "stride": _pair(stride), "padding": _pair(padding),
                                "ceil_mode": ceil_mode}, [_tensor(input)])


@function_rule(torch.flatten, methods=("flatten",))
def _f_flatten(input: Any, start_dim: int = 0, end_dim: int = -1) -> Mapped:
    return Mapped("Flatten", {"start_dim": _const(start_dim, "start_dim"), "end_dim": _const(end_dim, "end_dim")},
                  [_tensor(input)])


def _binary(type_: str) -> Callable[..., Mapped]:
    def rule(input: Any, other: Any, *, alpha: Any = 1, out: Any = None) -> Mapped:
        if alpha != 1:
            raise Unmappable(f"{type_.lower()} with alpha={alpha!r}")
        return Mapped(type_, {}, [_tensor(input), _tensor(other, "second operand")])
    return rule


function_rule(operator.add, operator.iadd, torch.add, methods=("add", "add_"))(_binary("Add"))
function_rule(operator.mul, operator.imul, torch.mul, methods=("mul", "mul_"))(_binary("Multiply"))


@function_rule(torch.cat, torch.concat, torch.concatenate)
def _f_cat(tensors: Any, dim: int = 0, *, out: Any = None) -> Mapped:
    if not isinstance(tensors, list | tuple):
        raise Unmappable("cat of a computed sequence")
    return Mapped("Concat", {"dim": _const(dim, "dim")}, [_tensor(t) for t in tensors])


def permute_dims(dims: list[int], rank: int) -> Mapped:
    """A permutation of all dims (batch included) as the catalog's per-sample Permute; the
    batch must stay first."""
    dims = [d % rank for d in dims]
    if sorted(dims) != list(range(rank)) or dims[0] != 0:
        raise Unmappable(f"permute {dims} moves the batch dimension")
    return Mapped("Permute", {"dims": [d - 1 for d in dims[1:]]})
