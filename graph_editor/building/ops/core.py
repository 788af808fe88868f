"""Input, Output, Linear, Identity, Scale, ScaleBy, Dropout, Dropout2d, DropPath and Embedding."""

from __future__ import annotations

import operator
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import fx, nn

from ...analysis.per_node import flop_rule, leading_rows, matmul_flops, zero_flops
from ...importer.rules import (
    Mapped,
    Unmappable,
    attributes,
    const,
    free_module_path,
    function_rule,
    graph_fold,
    library_function_rule,
    library_rule,
    module_rule,
    parameter_read,
    plain,
    tensor,
)
from ...model.layers.core import SCALE_INIT
from ..modules import Call, Example, Params, Shape, builder, or_input, plain_builder


# ------------------------------------------------------------------ modules of our own
# Plain nn.Module classes: a built network, its state_dict and its exported model.py (which copies
# their source) read like hand-written PyTorch.
class TabularEmbedding(nn.Module):
    """Embeds integer category codes; with ``columns``, embeds those columns of a tabular
    row and concatenates the vectors."""

    def __init__(self, num_embeddings: int, embedding_dim: int, columns: list[int] | None = None) -> None:
        super().__init__()
        self.embedding = nn.Embedding(num_embeddings, embedding_dim)
        self.columns = list(columns) if columns else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.columns is None:
            return self.embedding(x.long())
        codes = x[:, self.columns].long()
        return self.embedding(codes).flatten(1)



class Scale(nn.Module):
    """Multiplies by a learned factor per channel: ``gamma`` has the channels' shape, e.g. ``[C, 1, 1]``
    for CxHxW images or ``[E]`` for LxE tokens (layer scale)."""

    model_py_helpers: ClassVar[tuple[str, ...]] = ("SCALE_INIT",)   # model.py defines its default too

    def __init__(self, shape: list[int], init_value: float = SCALE_INIT) -> None:
        super().__init__()
        self.gamma = nn.Parameter(torch.full(tuple(shape), float(init_value)))
        self.init_value = float(init_value)   # what an import reads where gamma has no values (built on meta)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gamma

    def extra_repr(self) -> str:
        return f"shape={list(self.gamma.shape)}"


class DropPath(nn.Module):
    """Stochastic depth (torchvision's StochasticDepth, timm's DropPath): while training, zeroes the
    whole input of a sample (mode 'row') or of the batch ('batch') with probability p and scales
    what is kept by 1 / (1 - p); passes the input through in eval."""

    def __init__(self, p: float = 0.1, mode: str = "row") -> None:
        super().__init__()
        self.p, self.mode = p, mode

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        keep = 1.0 - self.p
        shape = [x.shape[0]] + [1] * (x.dim() - 1) if self.mode == "row" else [1] * x.dim()
        noise = x.new_empty(shape).bernoulli_(keep)
        if keep > 0.0:
            noise.div_(keep)
        return x * noise

    def extra_repr(self) -> str:
        return f"p={self.p}, mode={self.mode!r}"


zero_flops("Input", "Output")  # expressed by the fx graph itself: a placeholder and the output


# ------------------------------------------------------------------ Linear
@builder("Linear", example=Example((6,), {"out_features": 4}))
def _linear(p: Params, xs: list[Shape]) -> Call:
    return Call(nn.Linear, (or_input(p["in_features"], xs[0][-1]), p["out_features"]), {"bias": p["bias"]})


@flop_rule("Linear")
def _linear_flops(p: Params, xs: list[Shape], out: Shape) -> int:
    return matmul_flops(leading_rows(xs[0]), xs[0][-1], out[-1])


@module_rule(nn.Linear)
def _import_linear(m: nn.Linear, xs: list[fx.Node]) -> Mapped:
    return Mapped("Linear", {"in_features": m.in_features, "out_features": m.out_features,
                             "bias": m.bias is not None}, xs)


# ------------------------------------------------------------------ Identity
plain_builder("Identity", nn.Identity, Example((6,)))
zero_flops("Identity")
module_rule(nn.Identity)(plain("Identity"))


# ------------------------------------------------------------------ Dropout, Dropout2d
@builder("Dropout", example=Example((6,), {"p": 0.25}))
def _dropout(p: Params, xs: list[Shape]) -> Call:
    return Call(nn.Dropout, (p["p"],))


@builder("Dropout2d", example=Example((3, 4, 4), {"p": 0.25}))
def _dropout2d(p: Params, xs: list[Shape]) -> Call:
    return Call(nn.Dropout2d, (p["p"],))


zero_flops("Dropout", "Dropout2d")
module_rule(nn.Dropout)(attributes("Dropout", "p"))
module_rule(nn.Dropout2d)(attributes("Dropout2d", "p"))


@function_rule(F.dropout)
def _f_dropout(input: Any, p: float = 0.5, training: bool = True, inplace: bool = False) -> Mapped:
    return Mapped("Dropout", {"p": const(p, "p")}, [tensor(input)])


# ------------------------------------------------------------------ DropPath
@builder("DropPath", example=Example((3, 4, 4), {"p": 0.25, "mode": "batch"}))
def _drop_path(p: Params, xs: list[Shape]) -> Call:
    return Call(DropPath, (p["p"], p["mode"]))


zero_flops("DropPath")
module_rule(DropPath)(attributes("DropPath", "p", "mode"))
library_rule("torchvision.ops.stochastic_depth.StochasticDepth")(attributes("DropPath", "p", "mode"))


@library_function_rule("torchvision.ops.stochastic_depth.stochastic_depth")
def _f_stochastic_depth(input: Any, p: float, mode: str, training: bool = True) -> Mapped:
    # training is the caller's mode at trace time; the DropPath node follows its graph's mode instead
    return Mapped("DropPath", {"p": float(const(p, "p")), "mode": const(mode, "mode")}, [tensor(input)])


@library_function_rule("timm.layers.drop.drop_path")
def _f_drop_path(x: Any, drop_prob: float = 0.0, training: bool = False, scale_by_keep: bool = True) -> Mapped:
    if not scale_by_keep:
        raise Unmappable("timm drop_path with scale_by_keep=False (what is kept is not scaled by 1 / (1 - p))")
    return Mapped("DropPath", {"p": float(const(drop_prob, "drop_prob")), "mode": "row"}, [tensor(x)])


@library_rule("timm.layers.drop.DropPath")
def _import_timm_drop_path(m: Any, xs: list[fx.Node]) -> Mapped:
    if not m.scale_by_keep:
        raise Unmappable("timm DropPath with scale_by_keep=False (what is kept is not scaled by 1 / (1 - p))")
    return Mapped("DropPath", {"p": float(m.drop_prob), "mode": "row"}, xs)


# ------------------------------------------------------------------ ScaleBy
class ScaleBy(nn.Module):
    """Multiplies (or divides) by a fixed number; nothing learned."""

    def __init__(self, factor: float, divide: bool = False) -> None:
        super().__init__()
        self.factor, self.divide = factor, divide

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / self.factor if self.divide else x * self.factor

    def extra_repr(self) -> str:
        return f"factor={self.factor}, divide={self.divide}"


@builder("ScaleBy", example=Example((3, 4), {"factor": 0.125, "divide": False}))
def _scale_by(p: Params, xs: list[Shape]) -> Call:
    return Call(ScaleBy, (float(p["factor"]), bool(p["divide"])))


zero_flops("ScaleBy")  # element-wise: FlopCounterMode counts none


@module_rule(ScaleBy)
def _import_scale_by(m: ScaleBy, xs: list[fx.Node]) -> Mapped:
    return Mapped("ScaleBy", {"factor": float(m.factor), "divide": bool(m.divide)}, xs)


def number(value: Any) -> float | None:
    """``value`` as a float when it is a plain number (not a bool, not a traced value), else None."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


@function_rule(operator.truediv, operator.itruediv, torch.div, torch.true_divide, methods=("div", "div_",
                                                                                          "true_divide"))
def _f_divide(input: Any, other: Any, *, rounding_mode: Any = None, out: Any = None) -> Mapped:
    if rounding_mode is not None:
        raise Unmappable(f"division with rounding_mode={rounding_mode!r}")
    factor = number(other)
    if factor is None and number(input) is None:
        return Mapped("Divide", {}, [tensor(input), tensor(other, "divisor")])  # a / b: ops.merge's Divide
    if factor is None:
        raise Unmappable("divides a number by a tensor; only a tensor by a tensor (Divide) or by a fixed number "
                         "(ScaleBy) has a layer")
    if factor == 0:
        raise Unmappable("divides by zero")
    return Mapped("ScaleBy", {"factor": factor, "divide": True}, [tensor(input)])


@function_rule(operator.neg, torch.neg, torch.negative, methods=("neg", "negative"))
def _f_negate(input: Any) -> Mapped:
    """``-x`` (rotary embeddings' ``torch.cat([-x2, x1])``) is ``x * -1``: ScaleBy, exactly."""
    return Mapped("ScaleBy", {"factor": -1.0, "divide": False}, [tensor(input)])


# ------------------------------------------------------------------ Scale
@builder("Scale", example=Example((5, 8), {"dim": -1, "init_value": 0.5}))
def _scale(p: Params, xs: list[Shape]) -> Call:
    x = xs[0]
    d = p["dim"] % len(x)
    return Call(Scale, ([or_input(p["num_features"], x[d]), *[1] * (len(x) - 1 - d)], p["init_value"]))


zero_flops("Scale")  # element-wise


@module_rule(Scale)
@library_rule("timm.layers.layer_scale.LayerScale")  # gamma [C] over the last dim, x * gamma (or in place)
def _import_scale(m: Any, xs: list[fx.Node]) -> Mapped:
    return _scale_of(m.gamma, xs, getattr(m, "init_value", SCALE_INIT))   # our Scale keeps it; timm's LayerScale not


def _scale_of(gamma: torch.Tensor, xs: list[fx.Node], built_with: float = SCALE_INIT) -> Mapped:
    """A per-channel factor ``[C]`` or ``[C, 1, ..., 1]`` as Scale over dim ``-gamma.dim()`` (``built_with``:
    the initial factor its module was made with, where it says; else the catalog's default)."""
    if gamma.dim() < 1 or any(s != 1 for s in gamma.shape[1:]):
        raise Unmappable(f"scales by a tensor of shape {list(gamma.shape)}; a per-channel scale is [C] or "
                         "[C, 1, ..., 1]")
    first = gamma.detach().flatten()[0]
    # a factor still at its initial value (all equal) keeps it; trained factors come with the weights, and
    # on meta (no values) the factor the module was built with
    init = float(f"{float(first):.7g}") if gamma.device.type != "meta" and bool((gamma == first).all()) else built_with
    # (float32's digits only: 0.3 stored in float32 reads 0.30000001192092896 as a Python float)
    return Mapped("Scale", {"num_features": int(gamma.shape[0]), "dim": -gamma.dim(), "init_value": float(init)},
                  xs)


_MULTIPLY = (operator.mul, operator.imul, torch.mul)


@graph_fold("layer scale")
def fold_layer_scale(gm: fx.GraphModule) -> None:
    """Layer scale written in a forward, ``x * self.gamma`` or ``x.mul(self.gamma.reshape(1, -1, 1, 1))``
    (timm's ConvNeXt), becomes a call of a :class:`Scale` module holding gamma, so it imports as one
    Scale node rather than a Parameter node and a Multiply. Only a parameter that is one factor per
    channel (``[C]``, ``[C, 1, 1]``, leading 1s aside) and read for nothing else is folded."""
    changed = False
    for n in list(gm.graph.nodes):
        if not (n.op == "call_function" and n.target in _MULTIPLY or n.op == "call_method" and n.target in (
                "mul", "mul_")) or len(n.args) != 2 or n.kwargs:
            continue
        for x, factor in (n.args, n.args[::-1]):
            found = _channel_factor(gm, factor)
            if found is not None and isinstance(x, fx.Node) and x.op != "get_attr":
                break
        else:
            continue
        target, gamma, chain = found
        path = free_module_path(gm, f"{target}_scale")
        with torch.device(gamma.device):  # a model built on meta (counts only) has no values to copy
            module = Call(Scale, (list(gamma.shape), _scale_of(gamma, []).params["init_value"])).make()
        with torch.no_grad():
            module.get_parameter("gamma").copy_(gamma)
        gm.add_submodule(path, module)
        with gm.graph.inserting_before(n):
            call = gm.graph.call_module(path, (x,))
        call.meta = dict(n.meta)
        n.replace_all_uses_with(call)
        for dead in (n, *chain):
            gm.graph.erase_node(dead)
        changed = True
    if changed:
        gm.recompile()


def _channel_factor(gm: fx.GraphModule, node: Any) -> tuple[str, torch.Tensor, list[fx.Node]] | None:
    """(parameter path, gamma as ``[C, 1, ..., 1]``, the nodes reading it) when ``node`` is a parameter,
    or a reshape or view of one, read only here and holding one factor per channel; else None."""
    chain = []
    if isinstance(node, fx.Node) and len(node.users) == 1 and (
            node.op == "call_method" and node.target in ("reshape", "view") or node.target is torch.reshape):
        chain.append(node)
        node, dims = node.args[0], node.args[1:]
    else:
        dims = None
    value = parameter_read(gm, node)
    if value is None:
        return None
    shape = list(value.shape)
    if dims is not None:
        if len(dims) == 1 and isinstance(dims[0], list | tuple):
            dims = tuple(dims[0])
        if not all(isinstance(d, int) for d in dims):
            return None
        shape = list(torch.empty(shape, device="meta").reshape(dims).shape)
    while len(shape) > 1 and shape[0] == 1:
        shape.pop(0)
    if not shape or shape[0] == 1 or any(d != 1 for d in shape[1:]):
        return None  # one factor for all (ReZero's alpha) stays a Parameter times x: it broadcasts anywhere
    return str(node.target), value.detach().reshape(shape), [*chain, node]


# ------------------------------------------------------------------ Embedding
@builder("Embedding", example=Example((6,), {"num_embeddings": 7, "embedding_dim": 3, "columns": [0, 2]},
                                    codes_below=7))
def _embedding(p: Params, xs: list[Shape]) -> Call:
    return Call(TabularEmbedding, (p["num_embeddings"], p["embedding_dim"]), {"columns": p["columns"]})


zero_flops("Embedding")  # a gather, not arithmetic


@module_rule(nn.Embedding)
def _import_embedding(m: nn.Embedding, xs: list[fx.Node]) -> Mapped:
    if m.max_norm is not None:
        raise Unmappable("Embedding with max_norm (it rescales weights in the forward pass)")
    return Mapped("Embedding", {"num_embeddings": m.num_embeddings, "embedding_dim": m.embedding_dim}, xs,
                  prefix="embedding.")


@module_rule(TabularEmbedding)
def _import_tabular_embedding(m: TabularEmbedding, xs: list[fx.Node]) -> Mapped:
    e = m.embedding
    return Mapped("Embedding", {"num_embeddings": e.num_embeddings, "embedding_dim": e.embedding_dim,
                                "columns": m.columns}, xs)
