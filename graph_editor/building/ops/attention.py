"""Transformer parts: self-attention, scaled dot-product attention, the encoder layer, patch embedding,
class token + positions."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import fx, nn
from torch.utils.flop_counter import conv_flop_count, sdpa_flop_count

from ...analysis.per_node import flop_rule, leading_rows, matmul_flops, zero_flops
from ...importer.rules import (
    Mapped,
    Unmappable,
    attributes,
    call_rule,
    const,
    function_rule,
    module_rule,
    tensor,
)
from ..modules import Call, Example, Params, Shape, builder, or_input


# ------------------------------------------------------------------ modules of our own
# Plain nn.Module classes: a built network, its state_dict and its exported model.py (which copies
# their source) read like hand-written PyTorch.
class SelfAttention(nn.Module):
    """``nn.MultiheadAttention`` used as self-attention on a batch-first sequence."""

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(embed_dim, num_heads, dropout=dropout, bias=bias, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.attn(x, x, x, need_weights=False)[0]


class PatchEmbed(nn.Module):
    """Cuts an image into ``patch_size`` squares and projects each to an ``embed_dim`` token."""

    def __init__(self, in_channels: int, embed_dim: int, patch_size: int) -> None:
        super().__init__()
        self.proj = nn.Conv2d(in_channels, embed_dim, patch_size, stride=patch_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).flatten(2).transpose(1, 2)


class ClassTokenPosEmbed(nn.Module):
    """Prepends a learned class token and adds learned position embeddings (ViT)."""

    def __init__(self, num_tokens: int, embed_dim: int, class_token: bool = True, dropout: float = 0.0) -> None:
        super().__init__()
        extra = 1 if class_token else 0
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim)) if class_token else None
        self.pos_embed = nn.Parameter(torch.empty(1, num_tokens + extra, embed_dim))
        self.dropout = nn.Dropout(dropout)
        if not self.pos_embed.is_meta:
            nn.init.trunc_normal_(self.pos_embed, std=0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.cls_token is not None:
            x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
        return self.dropout(x + self.pos_embed)


def _attention_flops(shape: Shape, heads: int) -> int:
    b, length, e = shape
    d = e // heads
    q = [b, heads, length, d]
    projections = matmul_flops(b * length, e, 3 * e) + matmul_flops(b * length, e, e)
    return projections + int(sdpa_flop_count(q, q, q))


# ------------------------------------------------------------------ MultiheadAttention
@builder("MultiheadAttention", example=Example((5, 8), {"num_heads": 2}))
def _mha(p: Params, xs: list[Shape]) -> Call:
    return Call(SelfAttention, (or_input(p["embed_dim"], xs[0][-1]), p["num_heads"]),
                {"dropout": p["dropout"], "bias": p["bias"]})


@flop_rule("MultiheadAttention")
def _mha_flops(p: Params, xs: list[Shape], out: Shape) -> int:
    return _attention_flops(xs[0], p["num_heads"])


@module_rule(SelfAttention)
def _import_self_attention(m: SelfAttention, xs: list[fx.Node]) -> Mapped:
    a = m.attn
    return Mapped("MultiheadAttention", {"embed_dim": a.embed_dim, "num_heads": a.num_heads, "dropout": a.dropout,
                                         "bias": a.in_proj_bias is not None}, xs)


@call_rule(nn.MultiheadAttention)
def _import_mha(m: nn.MultiheadAttention, q: Any, k: Any, v: Any, key_padding_mask: Any = None,
                need_weights: bool = True, attn_mask: Any = None, average_attn_weights: bool = True,
                is_causal: bool = False) -> Mapped:
    """``nn.MultiheadAttention`` as self-attention: ``attn(x, x, x)[0]`` becomes one node."""
    if not (q is k is v):
        raise Unmappable("MultiheadAttention that is not self-attention (query, key and value differ)")
    if key_padding_mask is not None or attn_mask is not None or is_causal:
        raise Unmappable("MultiheadAttention with a mask")
    if not m.batch_first or not m._qkv_same_embed_dim or m.bias_k is not None or m.add_zero_attn:
        raise Unmappable("MultiheadAttention with batch_first=False, kdim/vdim, add_bias_kv or add_zero_attn")
    return Mapped("MultiheadAttention", {"embed_dim": m.embed_dim, "num_heads": m.num_heads, "dropout": m.dropout,
                                         "bias": m.in_proj_bias is not None}, [tensor(q)], prefix="attn.")


# ------------------------------------------------------------------ TransformerEncoderLayer
@builder("TransformerEncoderLayer", example=Example((5, 8), {"nhead": 2, "dim_feedforward": 16, "dropout": 0.0}))
def _encoder(p: Params, xs: list[Shape]) -> Call:
    return Call(nn.TransformerEncoderLayer, (or_input(p["d_model"], xs[0][-1]), p["nhead"]), {
        "dim_feedforward": p["dim_feedforward"], "dropout": p["dropout"], "activation": p["activation"],
        "layer_norm_eps": p["layer_norm_eps"], "batch_first": True, "norm_first": p["norm_first"]})


@flop_rule("TransformerEncoderLayer")
def _encoder_flops(p: Params, xs: list[Shape], out: Shape) -> int:
    x = xs[0]
    ff = p["dim_feedforward"]
    return (_attention_flops(x, p["nhead"]) + matmul_flops(leading_rows(x), x[-1], ff)
            + matmul_flops(leading_rows(x), ff, x[-1]))


@module_rule(nn.TransformerEncoderLayer)
def _import_encoder(m: nn.TransformerEncoderLayer, xs: list[fx.Node]) -> Mapped:
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


# ------------------------------------------------------------------ PatchEmbed
@builder("PatchEmbed", example=Example((3, 8, 8), {"embed_dim": 8, "patch_size": 4}))
def _patch(p: Params, xs: list[Shape]) -> Call:
    return Call(PatchEmbed, (or_input(p["in_channels"], xs[0][1]), p["embed_dim"], p["patch_size"]))


@flop_rule("PatchEmbed")
def _patch_flops(p: Params, xs: list[Shape], out: Shape) -> int:
    x = xs[0]
    ps = p["patch_size"]
    conv_out = [x[0], p["embed_dim"], x[2] // ps, x[3] // ps]
    return int(conv_flop_count(list(x), [p["embed_dim"], x[1], ps, ps], conv_out, transposed=False))


@module_rule(PatchEmbed)
def _import_patch(m: PatchEmbed, xs: list[fx.Node]) -> Mapped:
    return Mapped("PatchEmbed", {"in_channels": m.proj.in_channels, "embed_dim": m.proj.out_channels,
                                 "patch_size": m.proj.kernel_size[0]}, xs)


# ------------------------------------------------------------------ ClassTokenPosEmbed
@builder("ClassTokenPosEmbed", example=Example((5, 8), {"dropout": 0.1}))
def _cls_pos(p: Params, xs: list[Shape]) -> Call:
    return Call(ClassTokenPosEmbed, (or_input(p["num_tokens"], xs[0][1]), or_input(p["embed_dim"], xs[0][2])),
                {"class_token": p["class_token"], "dropout": p["dropout"]})


zero_flops("ClassTokenPosEmbed")  # a concatenation and an addition


@module_rule(ClassTokenPosEmbed)
def _import_cls_pos(m: ClassTokenPosEmbed, xs: list[fx.Node]) -> Mapped:
    extra = 1 if m.cls_token is not None else 0
    return Mapped("ClassTokenPosEmbed", {"num_tokens": m.pos_embed.shape[1] - extra,
                                         "embed_dim": m.pos_embed.shape[2], "class_token": bool(extra),
                                         "dropout": m.dropout.p}, xs)


# ------------------------------------------------------------------ ScaledDotProductAttention
class ScaledDotProductAttention(nn.Module):
    """``F.scaled_dot_product_attention(q, k, v)``; its dropout acts only while training."""

    def __init__(self, is_causal: bool = False, dropout_p: float = 0.0, scale: float | None = None) -> None:
        super().__init__()
        self.is_causal, self.dropout_p, self.scale = is_causal, dropout_p, scale

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        if q.dim() == 3 or q.dim() > 4:  # ONNX's export takes 4-D q, k and v only: 3-D gets one head of its own,
            # and dims before the heads (NesT's blocks, Twins' windows) fold into the batch, then unfold
            fold = [t[:, None] if t.dim() == 3 else t.flatten(0, -4) for t in (q, k, v)]
            return self(*fold).reshape(*q.shape[:-1], v.shape[-1])
        # nn.functional, not F: the exported model.py copies this class and imports only torch and nn.
        return nn.functional.scaled_dot_product_attention(
            q, k, v, dropout_p=self.dropout_p if self.training else 0.0, is_causal=self.is_causal, scale=self.scale)

    def extra_repr(self) -> str:
        return f"is_causal={self.is_causal}, dropout_p={self.dropout_p}, scale={self.scale}"


@builder("ScaledDotProductAttention", example=Example((2, 5, 8), {"is_causal": True}))
def _sdpa(p: Params, xs: list[Shape]) -> Call:
    return Call(ScaledDotProductAttention, (), {"is_causal": p["is_causal"], "dropout_p": p["dropout_p"],
                                                "scale": p["scale"]})


@flop_rule("ScaledDotProductAttention")
def _sdpa_flops(p: Params, xs: list[Shape], out: Shape) -> int:
    """Two batched products, q kᵀ and weights · v, as ``sdpa_flop_count`` counts them (the causal mask
    and the softmax are not counted); leading dims fold into the batch."""
    q, k, v = xs
    rows = math.prod(q[:-2])
    return int(sdpa_flop_count([rows, 1, q[-2], q[-1]], [rows, 1, k[-2], k[-1]], [rows, 1, v[-2], v[-1]]))


module_rule(ScaledDotProductAttention)(attributes("ScaledDotProductAttention", "is_causal", "dropout_p", "scale"))


@function_rule(F.scaled_dot_product_attention)
def _f_sdpa(query: Any, key: Any, value: Any, attn_mask: Any = None, dropout_p: Any = 0.0, is_causal: Any = False,
            scale: Any = None, enable_gqa: Any = False) -> Mapped:
    if enable_gqa:
        raise Unmappable("scaled_dot_product_attention with enable_gqa")
    if attn_mask is not None:
        if const(is_causal, "is_causal"):
            raise Unmappable("scaled_dot_product_attention with both a mask and is_causal")
        return Mapped("MaskedAttention", {
            "dropout_p": float(const(dropout_p, "dropout_p")), "scale": None if scale is None else float(
                const(scale, "scale"))}, [tensor(query), tensor(key, "key"), tensor(value, "value"),
                                          tensor(attn_mask, "attn_mask")])
    return Mapped("ScaledDotProductAttention", {
        "is_causal": bool(const(is_causal, "is_causal")), "dropout_p": float(const(dropout_p, "dropout_p")),
        "scale": None if scale is None else float(const(scale, "scale"))},
        [tensor(query), tensor(key, "key"), tensor(value, "value")])


# ------------------------------------------------------------------ MaskedAttention
class MaskedAttention(nn.Module):
    """``F.scaled_dot_product_attention(q, k, v, attn_mask=mask)``; its dropout acts only while training."""

    def __init__(self, dropout_p: float = 0.0, scale: float | None = None) -> None:
        super().__init__()
        self.dropout_p, self.scale = dropout_p, scale

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if q.dim() == 3 or q.dim() > 4:  # ONNX's export takes 4-D q, k and v only: 3-D (SAM's heads folded into
            # the batch) gets one head of its own, dims before the heads fold into the batch, then unfold
            fold = [t[:, None] if t.dim() == 3 else t.flatten(0, -4) for t in (q, k, v)]
            if q.dim() == 3 and mask.dim() == 3:
                mask = mask[:, None]
            elif q.dim() > 4 and mask.dim() >= 3:  # its leading dims broadcast against q's: spelled out, then folded
                mask = mask.expand(*q.shape[:-3], *mask.shape[-3:]).flatten(0, -4)
            return self(*fold, mask).reshape(*q.shape[:-1], v.shape[-1])
        return nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=self.dropout_p if self.training else 0.0, scale=self.scale)

    def extra_repr(self) -> str:
        return f"dropout_p={self.dropout_p}, scale={self.scale}"


@builder("MaskedAttention", example=Example((2, 5, 5), {"scale": 0.5}))  # q, k, v and mask: the input (4-D, as ONNX wants)
def _masked(p: Params, xs: list[Shape]) -> Call:
    return Call(MaskedAttention, (), {"dropout_p": p["dropout_p"], "scale": p["scale"]})


@flop_rule("MaskedAttention")
def _masked_flops(p: Params, xs: list[Shape], out: Shape) -> int:
    return _sdpa_flops(p, xs[:3], out)  # the mask is an addition, which FlopCounterMode does not count


module_rule(MaskedAttention)(attributes("MaskedAttention", "dropout_p", "scale"))
