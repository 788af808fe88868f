"""Transformer parts: attention, scaled dot-product attention, encoder layer, patch embedding, class token
+ positions."""

from __future__ import annotations

from ..catalog import Params, ParamSpec, PortSpec, Shape, fmt_shape, layer
from ..errors import ShapeError
from ._rules import need_dim, need_rank

CAT = "Transformer"


def _seq(x: Shape, embed: int | None, heads: int | None = None) -> int:
    need_rank(x, 3, "a sequence LxE")
    e = need_dim(x, 2, embed, "embedding features")
    if heads is not None and e % heads:
        raise ShapeError(f"{heads} heads must divide the embedding size {e}")
    return e


@layer("MultiheadAttention", CAT, "Multi-head self-attention over a sequence (batch first).", [
    ParamSpec("embed_dim", "int", None, "Embedding size (empty: taken from the input).", minimum=1, optional=True),
    ParamSpec("num_heads", "int", 4, "Attention heads; must divide embed_dim.", minimum=1),
    ParamSpec("dropout", "float", 0.0, "Dropout on attention weights.", minimum=0.0, maximum=1.0),
    ParamSpec("bias", "bool", True, "Learn projection biases."),
], prefix="attn", key_params=("num_heads",))
def mha(p: Params, xs: list[Shape]) -> Shape:
    _seq(xs[0], p["embed_dim"], p["num_heads"])
    return xs[0]


@layer("TransformerEncoderLayer", CAT, "Self-attention plus MLP with residuals and LayerNorm.", [
    ParamSpec("d_model", "int", None, "Embedding size (empty: taken from the input).", minimum=1, optional=True),
    ParamSpec("nhead", "int", 4, "Attention heads; must divide d_model.", minimum=1),
    ParamSpec("dim_feedforward", "int", 512, "Hidden size of the MLP.", minimum=1),
    ParamSpec("dropout", "float", 0.1, "Dropout probability.", minimum=0.0, maximum=1.0),
    ParamSpec("activation", "choice", "gelu", "MLP activation.", choices=("relu", "gelu")),
    ParamSpec("layer_norm_eps", "float", 1e-5, "LayerNorm epsilon.", minimum=0.0),
    ParamSpec("norm_first", "bool", True, "Pre-norm (as in ViT) instead of post-norm."),
], prefix="encoder", display="Transformer Encoder", key_params=("nhead", "dim_feedforward"))
def encoder_layer(p: Params, xs: list[Shape]) -> Shape:
    _seq(xs[0], p["d_model"], p["nhead"])
    return xs[0]


@layer("PatchEmbed", CAT, "Cuts an image into patches and projects each to a token (ViT stem).", [
    ParamSpec("in_channels", "int", None, "Image channels (empty: taken from the input).", minimum=1, optional=True),
    ParamSpec("embed_dim", "int", 192, "Token size.", minimum=1),
    ParamSpec("patch_size", "int", 16, "Square patch side in pixels.", minimum=1),
], prefix="patch", display="Patch Embedding", key_params=("embed_dim", "patch_size"))
def patch_embed(p: Params, xs: list[Shape]) -> Shape:
    (x,) = xs
    need_rank(x, 4, "CxHxW input")
    need_dim(x, 1, p["in_channels"], "channels")
    ps = p["patch_size"]
    if x[2] % ps or x[3] % ps:
        raise ShapeError(f"patch size {ps} must divide the image size {x[2]}x{x[3]}")
    return (x[0], (x[2] // ps) * (x[3] // ps), p["embed_dim"])


@layer("ClassTokenPosEmbed", CAT, "Prepends a learned class token and adds learned position embeddings.", [
    ParamSpec("num_tokens", "int", None, "Tokens before the class token (empty: from the input).", minimum=1,
              optional=True),
    ParamSpec("embed_dim", "int", None, "Token size (empty: from the input).", minimum=1, optional=True),
    ParamSpec("class_token", "bool", True, "Prepend a class token."),
    ParamSpec("dropout", "float", 0.0, "Dropout after adding positions.", minimum=0.0, maximum=1.0),
], prefix="pos", display="Class Token + Positions")
def cls_pos(p: Params, xs: list[Shape]) -> Shape:
    (x,) = xs
    need_rank(x, 3, "a sequence LxE")
    need_dim(x, 1, p["num_tokens"], "tokens")
    need_dim(x, 2, p["embed_dim"], "embedding features")
    if len(x) != 3:
        raise ShapeError(f"expects LxE, receives {fmt_shape(x)}")
    return (x[0], x[1] + (1 if p["class_token"] else 0), x[2])


@layer("ScaledDotProductAttention", CAT, "softmax(q kᵀ · scale) v over queries q, keys k and values v "
       "(F.scaled_dot_product_attention): [B, heads, L, E] or [B, L, E].", [
           ParamSpec("is_causal", "bool", False, "Each query sees only keys at or before its position."),
           ParamSpec("dropout_p", "float", 0.0, "Dropout on the attention weights while training.", minimum=0.0,
                     maximum=1.0),
           ParamSpec("scale", "float", None, "Scale of q kᵀ (empty: 1/sqrt(E)).", minimum=0.0, optional=True),
       ], inputs=(PortSpec("q", doc="queries"), PortSpec("k", doc="keys"), PortSpec("v", doc="values")),
       prefix="sdpa", display="Scaled Dot-Product Attention", key_params=("is_causal",))
def sdpa(p: Params, xs: list[Shape]) -> Shape:
    q, k, v = xs
    for name, t in (("queries", q), ("keys", k), ("values", v)):
        if len(t) < 3:
            raise ShapeError(f"expects {name} of at least LxE per sample, receives {fmt_shape(t) or 'a scalar'}")
    # keys and values may hold one head for all the queries' (multi-query attention: MobileNetV5), broadcast
    if not len(q) == len(k) == len(v) or k[:-2] != v[:-2] or q[0] != k[0] or any(
            b not in (a, 1) for a, b in zip(q[1:-2], k[1:-2], strict=True)):
        raise ShapeError(f"queries, keys and values must agree before their last two dims (keys and values may have "
                         f"1 where queries have more): q {fmt_shape(q)}, k {fmt_shape(k)}, v {fmt_shape(v)}")
    if k[-1] != q[-1]:
        raise ShapeError(f"keys have {k[-1]} features, queries {q[-1]}: they must match (q {fmt_shape(q)}, "
                         f"k {fmt_shape(k)})")
    if v[-2] != k[-2]:
        raise ShapeError(f"values have {v[-2]} positions, keys {k[-2]}: they must match (k {fmt_shape(k)}, "
                         f"v {fmt_shape(v)})")
    return (*q[:-1], v[-1])


@layer("MaskedAttention", CAT, "softmax(q kᵀ · scale + mask) v (F.scaled_dot_product_attention with attn_mask): "
       "a float mask is added to the scores (a relative-position bias, -inf where a key is hidden), a boolean one "
       "keeps the keys where it is true; it broadcasts against [B, heads, L, S].", [
           ParamSpec("dropout_p", "float", 0.0, "Dropout on the attention weights while training.", minimum=0.0,
                     maximum=1.0),
           ParamSpec("scale", "float", None, "Scale of q kᵀ (empty: 1/sqrt(E)).", minimum=0.0, optional=True),
       ], inputs=(PortSpec("q", doc="queries"), PortSpec("k", doc="keys"), PortSpec("v", doc="values"),
                  PortSpec("mask", doc="added to the scores (float) or which keys each query sees (bool)")),
       prefix="attn", display="Masked Attention")
def masked_attention(p: Params, xs: list[Shape]) -> Shape:
    q, k, v, mask = xs
    sdpa({}, [q, k, v])  # queries, keys and values checked as SDPA checks them
    out = (*q[:-1], v[-1])
    scores = (*q[:-1], k[-2])
    if len(mask) > len(scores) or any(m not in (1, s) for m, s in zip(mask[::-1], scores[::-1], strict=False)):
        raise ShapeError(f"the mask {fmt_shape(mask, True)} does not broadcast against the scores "
                         f"{fmt_shape(scores, True)} (batch, heads, queries, keys)")
    return out
