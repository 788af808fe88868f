"""Element-wise activations and (log-)softmax: no FLOPs that ``FlopCounterMode`` counts."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import fx, nn

from ...analysis.per_node import zero_flops
from ...importer.rules import (
    FunctionRule,
    Mapped,
    Unmappable,
    attributes,
    const,
    free_module_path,
    function_rule,
    graph_fold,
    module_rule,
    parameter_read,
    plain,
    tensor,
    unary,
)
from ..modules import Call, Example, Params, Shape, builder, plain_builder

_X = Example((3, 4, 4))

# ------------------------------------------------------------------ without parameters
def _plain(type_: str, cls: type[nn.Module], functions: tuple[Any, ...], methods: tuple[str, ...] = ()) -> None:
    plain_builder(type_, cls, _X)
    zero_flops(type_)
    module_rule(cls)(plain(type_))
    function_rule(*functions, methods=methods)(unary(type_))


_plain("ReLU", nn.ReLU, (F.relu, torch.relu, F.relu_, torch.relu_), ("relu", "relu_"))
_plain("ReLU6", nn.ReLU6, (F.relu6,))
_plain("SiLU", nn.SiLU, (F.silu,))
_plain("Hardswish", nn.Hardswish, (F.hardswish,))
_plain("Hardsigmoid", nn.Hardsigmoid, (F.hardsigmoid,))
_plain("Sigmoid", nn.Sigmoid, (torch.sigmoid, F.sigmoid), ("sigmoid",))
_plain("Tanh", nn.Tanh, (torch.tanh, F.tanh), ("tanh",))
_plain("Mish", nn.Mish, (F.mish,))


# ------------------------------------------------------------------ LeakyReLU
@builder("LeakyReLU", example=Example((3, 4, 4), {"negative_slope": 0.2}))
def _leaky(p: Params, xs: list[Shape]) -> Call:
    return Call(nn.LeakyReLU, (p["negative_slope"],))


zero_flops("LeakyReLU")
module_rule(nn.LeakyReLU)(attributes("LeakyReLU", "negative_slope"))


@function_rule(F.leaky_relu)
def _f_leaky(input: Any, negative_slope: float = 0.01, inplace: bool = False) -> Mapped:
    return Mapped("LeakyReLU", {"negative_slope": const(negative_slope, "negative_slope")}, [tensor(input)])


# ------------------------------------------------------------------ GELU
@builder("GELU", example=Example((3, 4, 4), {"approximate": "tanh"}))
def _gelu(p: Params, xs: list[Shape]) -> Call:
    return Call(nn.GELU, (), {"approximate": p["approximate"]})


zero_flops("GELU")
module_rule(nn.GELU)(attributes("GELU", "approximate"))


@function_rule(F.gelu)
def _f_gelu(input: Any, approximate: str = "none") -> Mapped:
    return Mapped("GELU", {"approximate": const(approximate, "approximate")}, [tensor(input)])


# ------------------------------------------------------------------ ELU, Softplus
@builder("ELU", example=Example((3, 4, 4), {"alpha": 0.5}))
def _elu(p: Params, xs: list[Shape]) -> Call:
    return Call(nn.ELU, (p["alpha"],))


zero_flops("ELU")
module_rule(nn.ELU)(attributes("ELU", "alpha"))


@function_rule(F.elu)
def _f_elu(input: Any, alpha: float = 1.0, inplace: bool = False) -> Mapped:
    return Mapped("ELU", {"alpha": const(alpha, "alpha")}, [tensor(input)])


@builder("Softplus", example=Example((3, 4, 4), {"beta": 2.0, "threshold": 1.5}))
def _softplus(p: Params, xs: list[Shape]) -> Call:
    return Call(nn.Softplus, (), {"beta": p["beta"], "threshold": p["threshold"]})


zero_flops("Softplus")
module_rule(nn.Softplus)(attributes("Softplus", "beta", "threshold"))


@function_rule(F.softplus)
def _f_softplus(input: Any, beta: float = 1.0, threshold: float = 20.0) -> Mapped:
    return Mapped("Softplus", {"beta": const(beta, "beta"), "threshold": const(threshold, "threshold")},
                  [tensor(input)])


# ------------------------------------------------------------------ PReLU
@builder("PReLU", example=Example((3, 4, 4), {"num_parameters": 3, "init": 0.1}))
def _prelu(p: Params, xs: list[Shape]) -> Call:
    return Call(nn.PReLU, (p["num_parameters"], p["init"]))


zero_flops("PReLU")


@module_rule(nn.PReLU)
def _import_prelu(m: nn.PReLU, xs: list[fx.Node]) -> Mapped:
    # init only seeds the slopes; the imported ones come with the weights
    return Mapped("PReLU", {"num_parameters": m.num_parameters, "init": float(m.init)}, xs)


@graph_fold("prelu")
def _fold_prelu(gm: fx.GraphModule) -> None:
    """``F.prelu(x, self.weight)`` becomes a call of an ``nn.PReLU`` holding that weight (one slope, or
    one per channel), so it imports as a PReLU node."""
    changed = False
    for n in list(gm.graph.nodes):
        if n.op != "call_function" or n.target not in (F.prelu, torch.prelu):
            continue
        x = n.args[0] if n.args else n.kwargs.get("input")
        slopes = n.args[1] if len(n.args) > 1 else n.kwargs.get("weight")
        weight = parameter_read(gm, slopes)
        if weight is None or weight.dim() != 1 or not isinstance(x, fx.Node):
            continue
        module = Call(nn.PReLU, (weight.numel(),)).make()
        with torch.no_grad():
            module.get_parameter("weight").copy_(weight)
        path = free_module_path(gm, f"{slopes.target}_prelu")  # named after its slopes, as layer scale is
        gm.add_submodule(path, module)
        with gm.graph.inserting_before(n):
            call = gm.graph.call_module(path, (x,))
        call.meta = dict(n.meta)
        n.replace_all_uses_with(call)
        gm.graph.erase_node(n)
        gm.graph.erase_node(slopes)
        changed = True
    if changed:
        gm.recompile()


# ------------------------------------------------------------------ Softmax, LogSoftmax
def _softmax_module(m: nn.Softmax | nn.LogSoftmax, xs: list[fx.Node]) -> Mapped:
    if m.dim is None:
        raise Unmappable(f"{type(m).__name__} without dim")
    return Mapped(type(m).__name__, {"dim": m.dim}, xs)


def _softmax_function(type_: str) -> FunctionRule:
    def rule(input: Any, dim: Any = None, _stacklevel: int = 3, dtype: Any = None) -> Mapped:
        if dim is None or dtype is not None:
            raise Unmappable(f"{type_.lower()} needs an explicit dim and no dtype")
        return Mapped(type_, {"dim": const(dim, "dim")}, [tensor(input)])
    return rule


def _softmax(type_: str, cls: type[nn.Softmax] | type[nn.LogSoftmax], functions: tuple[Any, ...], method: str) -> None:
    def build(p: dict[str, Any], xs: list[Shape]) -> Call:
        return Call(cls, (), {"dim": p["dim"]})

    builder(type_, example=Example((3, 4, 4), {"dim": 1}))(build)
    zero_flops(type_)
    module_rule(cls)(_softmax_module)
    function_rule(*functions, methods=(method,))(_softmax_function(type_))


_softmax("Softmax", nn.Softmax, (F.softmax, torch.softmax), "softmax")
_softmax("LogSoftmax", nn.LogSoftmax, (F.log_softmax, torch.log_softmax), "log_softmax")
