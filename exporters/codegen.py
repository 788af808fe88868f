"""Readable PyTorch source for a built graph: constructor calls written from each module's attributes.

Every ``torch.nn`` class the catalog builds has an entry here; the graph's own layer classes
(:mod:`graph_editor.build.layers`) are written from their attributes too and their class source is
copied into the file, so the result needs only torch. A module of any other class cannot be
written and gives an ExportError naming its node.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from torch import nn

from graph_editor.build import layers as L

Writer = Callable[[nn.Module], str]


def _t(v: object) -> str:
    return repr(tuple(v)) if isinstance(v, list | tuple) else repr(v)


def _conv(m: nn.Module) -> str:
    args = (f"{m.in_channels}, {m.out_channels}, kernel_size={_t(m.kernel_size)}, stride={_t(m.stride)}, "
            f"padding={_t(m.padding)}")
    if isinstance(m, nn.ConvTranspose2d):
        args += f", output_padding={_t(m.output_padding)}"
    return (f"nn.{type(m).__name__}({args}, dilation={_t(m.dilation)}, groups={m.groups}, "
            f"bias={m.bias is not None}, padding_mode={m.padding_mode!r})")


def _bn(m: nn.Module) -> str:
    return (f"nn.{type(m).__name__}({m.num_features}, eps={m.eps!r}, momentum={m.momentum!r}, affine={m.affine}, "
            f"track_running_stats={m.track_running_stats})")


def _encoder(m: nn.TransformerEncoderLayer) -> str:
    act = {1: "relu", 2: "gelu"}.get(getattr(m, "activation_relu_or_gelu", 0))
    if act is None:
        raise ValueError("its activation is neither relu nor gelu")
    return (f"nn.TransformerEncoderLayer({m.self_attn.embed_dim}, {m.self_attn.num_heads}, "
            f"dim_feedforward={m.linear1.out_features}, dropout={m.dropout.p!r}, activation={act!r}, "
            f"layer_norm_eps={m.norm1.eps!r}, batch_first={m.self_attn.batch_first}, norm_first={m.norm_first}, "
            f"bias={m.linear1.bias is not None})")


WRITERS: dict[type[nn.Module], Writer] = {
    nn.Linear: lambda m: f"nn.Linear({m.in_features}, {m.out_features}, bias={m.bias is not None})",
    nn.Conv1d: _conv, nn.Conv2d: _conv, nn.ConvTranspose2d: _conv,
    nn.BatchNorm1d: _bn, nn.BatchNorm2d: _bn,
    nn.LayerNorm: lambda m: (f"nn.LayerNorm({_t(m.normalized_shape)}, eps={m.eps!r}, "
                             f"elementwise_affine={m.elementwise_affine}, bias={getattr(m, 'bias', None) is not None})"),
    nn.GroupNorm: lambda m: f"nn.GroupNorm({m.num_groups}, {m.num_channels}, eps={m.eps!r}, affine={m.affine})",
    nn.LeakyReLU: lambda m: f"nn.LeakyReLU({m.negative_slope!r})",
    nn.GELU: lambda m: f"nn.GELU(approximate={m.approximate!r})",
    nn.Softmax: lambda m: f"nn.Softmax(dim={m.dim})",
    nn.LogSoftmax: lambda m: f"nn.LogSoftmax(dim={m.dim})",
    nn.MaxPool2d: lambda m: (f"nn.MaxPool2d({_t(m.kernel_size)}, stride={_t(m.stride)}, padding={_t(m.padding)}, "
                             f"dilation={_t(m.dilation)}, ceil_mode={m.ceil_mode})"),
    nn.AvgPool2d: lambda m: (f"nn.AvgPool2d({_t(m.kernel_size)}, stride={_t(m.stride)}, padding={_t(m.padding)}, "
                             f"ceil_mode={m.ceil_mode}, count_include_pad={m.count_include_pad})"),
    nn.AdaptiveAvgPool2d: lambda m: f"nn.AdaptiveAvgPool2d({_t(m.output_size)})",
    nn.Dropout: lambda m: f"nn.Dropout({m.p!r})",
    nn.Dropout2d: lambda m: f"nn.Dropout2d({m.p!r})",
    nn.Flatten: lambda m: f"nn.Flatten({m.start_dim}, {m.end_dim})",
    nn.TransformerEncoderLayer: _encoder,
    L.Add: lambda m: "Add()",
    L.Multiply: lambda m: "Multiply()",
    L.Concat: lambda m: f"Concat(dim={m.dim})",
    L.Reshape: lambda m: f"Reshape({list(m.shape)!r})",
    L.Permute: lambda m: f"Permute({list(m.dims)!r})",
    L.SelectToken: lambda m: f"SelectToken({m.index})",
    L.TabularEmbedding: lambda m: (f"TabularEmbedding({m.embedding.num_embeddings}, {m.embedding.embedding_dim}, "
                                   f"columns={m.columns!r})"),
    L.SelfAttention: lambda m: (f"SelfAttention({m.attn.embed_dim}, {m.attn.num_heads}, dropout={m.attn.dropout!r}, "
                                f"bias={m.attn.in_proj_bias is not None})"),
    L.PatchEmbed: lambda m: (f"PatchEmbed({m.proj.in_channels}, {m.proj.out_channels}, "
                             f"patch_size={m.proj.kernel_size[0]})"),
    L.ClassTokenPosEmbed: lambda m: (f"ClassTokenPosEmbed({m.pos_embed.shape[1] - (m.cls_token is not None)}, "
                                     f"{m.pos_embed.shape[2]}, class_token={m.cls_token is not None}, "
                                     f"dropout={m.dropout.p!r})"),
}
for _cls in (nn.ReLU, nn.ReLU6, nn.SiLU, nn.Hardswish, nn.Sigmoid, nn.Tanh, nn.Identity):
    WRITERS[_cls] = lambda m, _n=_cls.__name__: f"nn.{_n}()"


def constructor(module: nn.Module) -> str | None:
    """Python source that constructs an equal module (same class and hyper-parameters), or None."""
    writer = WRITERS.get(type(module))
    return writer(module) if writer else None


def local_class_source(module: nn.Module) -> str | None:
    """The source of the graph's own layer class used by ``module`` (copied into model.py), or None."""
    cls = type(module)
    if cls.__module__ != L.__name__:
        return None
    return inspect.getsource(cls).rstrip() + "\n"
