"""Element-wise activations and (log-)softmax: no FLOPs that ``FlopCounterMode`` counts."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..analysis import zero_flops
from ..import_rules import (
    Mapped,
    Unmappable,
    attributes,
    const,
    function_rule,
    module_rule,
    plain,
    tensor,
    unary,
)
from ..modules import Call, Example, builder, plain_builder

_X = Example((3, 4, 4))

# ------------------------------------------------------------------ without parameters
for _type, _cls, _functions, _methods in [
    ("ReLU", nn.ReLU, (F.relu, torch.relu, F.relu_, torch.relu_), ("relu", "relu_")),
    ("ReLU6", nn.ReLU6, (F.relu6,), ()),
    ("SiLU", nn.SiLU, (F.silu,), ()),
    ("Hardswish", nn.Hardswish, (F.hardswish,), ()),
    ("Hardsigmoid", nn.Hardsigmoid, (F.hardsigmoid,), ()),
    ("Sigmoid", nn.Sigmoid, (torch.sigmoid, F.sigmoid), ("sigmoid",)),
    ("Tanh", nn.Tanh, (torch.tanh, F.tanh), ("tanh",)),
]:
    plain_builder(_type, _cls, _X)
    zero_flops(_type)
    module_rule(_cls)(plain(_type))
    function_rule(*_functions, methods=_methods)(unary(_type))


# ------------------------------------------------------------------ LeakyReLU
@builder("LeakyReLU", example=Example((3, 4, 4), {"negative_slope": 0.2}))
def _leaky(p, xs):
    return Call(nn.LeakyReLU, (p["negative_slope"],))


zero_flops("LeakyReLU")
module_rule(nn.LeakyReLU)(attributes("LeakyReLU", "negative_slope"))


@function_rule(F.leaky_relu)
def _f_leaky(input: Any, negative_slope: float = 0.01, inplace: bool = False) -> Mapped:
    return Mapped("LeakyReLU", {"negative_slope": const(negative_slope, "negative_slope")}, [tensor(input)])


# ------------------------------------------------------------------ GELU
@builder("GELU", example=Example((3, 4, 4), {"approximate": "tanh"}))
def _gelu(p, xs):
    return Call(nn.GELU, (), {"approximate": p["approximate"]})


zero_flops("GELU")
module_rule(nn.GELU)(attributes("GELU", "approximate"))


@function_rule(F.gelu)
def _f_gelu(input: Any, approximate: str = "none") -> Mapped:
    return Mapped("GELU", {"approximate": const(approximate, "approximate")}, [tensor(input)])


# ------------------------------------------------------------------ Softmax, LogSoftmax
def _softmax_module(m: nn.Softmax | nn.LogSoftmax, xs: list) -> Mapped:
    if m.dim is None:
        raise Unmappable(f"{type(m).__name__} without dim")
    return Mapped(type(m).__name__, {"dim": m.dim}, xs)


def _softmax_function(type_: str):
    def rule(input: Any, dim: Any = None, _stacklevel: int = 3, dtype: Any = None) -> Mapped:
        if dim is None or dtype is not None:
            raise Unmappable(f"{type_.lower()} needs an explicit dim and no dtype")
        return Mapped(type_, {"dim": const(dim, "dim")}, [tensor(input)])
    return rule


for _type, _cls, _functions, _method in [
    ("Softmax", nn.Softmax, (F.softmax, torch.softmax), "softmax"),
    ("LogSoftmax", nn.LogSoftmax, (F.log_softmax, torch.log_softmax), "log_softmax"),
]:
    builder(_type, example=Example((3, 4, 4), {"dim": 1}))(lambda p, xs, _cls=_cls: Call(_cls, (), {"dim": p["dim"]}))
    zero_flops(_type)
    module_rule(_cls)(_softmax_module)
    function_rule(*_functions, methods=(_method,))(_softmax_function(_type))
