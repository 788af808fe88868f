"""The Module node's PyTorch side: import the class, construct it, count it, write it.

A Module node names a class as ``package.module:Class`` and its constructor arguments (JSON); its
weights travel as the node's state like any other node's. The importer no longer makes them (it
keeps what the catalog cannot map as a Program node, the module's own exported program, with no
constructor arguments to guess: :mod:`.program`); graph files that hold them still build.

Building imports the named module: it runs that installed package's code, never text from the
graph file (the reference is a dotted name checked against a pattern, the arguments JSON literals),
and the class must be an ``nn.Module``. Shapes and FLOPs come from running the module on the
``meta`` device under ``FlopCounterMode``; a module that reads a tensor's value (``.item()``)
cannot run there and is run once on a small real input instead.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from ...analysis.per_node import flop_rule
from ...model.errors import ParamError
from ...model.layers.module_ref import parse_class, parse_kwargs
from ..modules import Call, Example, Params, Shape, builder

TYPE = "Module"
# Layer types with no import rule: nothing the importer makes is one (see the module docstring).
FALLBACK_TYPES = frozenset({TYPE})
_LITERALS = (bool, int, float, str, type(None))


def resolve(ref: str) -> type[nn.Module]:
    """The class ``package.module:Class`` names; ValueError saying what failed (import, lookup, type)."""
    try:
        module_name, qualname = parse_class(ref)
    except ParamError as exc:
        raise ValueError(exc.message) from None
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:  # the named package may fail while importing in any way
        raise ValueError(f"cannot import class {ref}: {type(exc).__name__}: {exc}") from None
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise ValueError(f"cannot import class {ref}: {module_name} has no {qualname}")
    if not (isinstance(obj, type) and issubclass(obj, nn.Module)):
        raise ValueError(f"{ref} is not an nn.Module class")
    return obj


@dataclass(frozen=True)
class ImportedCall(Call):
    """The construction of a Module node's class: written as ``Class(k=v)`` after an import line."""

    ref: str = ""

    def source(self) -> str:
        parts = [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"{self.ref.partition(':')[2]}({', '.join(parts)})"

    def import_line(self) -> str:
        module_name, _, qualname = self.ref.partition(":")
        return f"from {module_name} import {qualname.split('.')[0]}"


def construct(ref: str, kwargs: dict[str, Any]) -> nn.Module:
    """``Class(**kwargs)``, remembering the call for the source writer; ValueError naming the class."""
    cls = resolve(ref)
    call = ImportedCall(cls, (), dict(kwargs), ref=ref)
    try:
        return call.make()
    except Exception as exc:  # the class's own constructor refuses the arguments
        raise ValueError(f"{ref}(**{json.dumps(kwargs)}) fails: {type(exc).__name__}: {exc}") from None


@lru_cache(maxsize=512)
def _probe(ref: str, kwargs: str, shape: tuple[int, ...]) -> tuple[tuple[int, ...], int]:
    """(output shape, FLOPs) of the module on an input of ``shape`` (batch first)."""
    with torch.device("meta"):
        module = construct(ref, json.loads(kwargs))
    try:
        with FlopCounterMode(display=False) as counter:
            out = module(torch.empty(shape, device="meta"))
    except Exception:  # reads a value (``.item()``): once on a small real input, weights at random
        with torch.device("cpu"):
            module = construct(ref, json.loads(kwargs))
            x = torch.randn(shape)
        try:
            with torch.no_grad(), FlopCounterMode(display=False) as counter:
                out = module(x)
        except Exception as exc:
            raise ValueError(f"{ref} fails on an input of shape {list(shape)}: {type(exc).__name__}: "
                             f"{str(exc).strip().splitlines()[0] if str(exc).strip() else ''}") from None
    if not isinstance(out, torch.Tensor):
        raise ValueError(f"{ref} returns {type(out).__name__}, not one tensor")
    return tuple(out.shape), counter.get_total_flops()


def probe(p: Params, in_shape: Shape) -> tuple[Shape, int]:
    return _probe(p["cls"], json.dumps(parse_kwargs(p["kwargs"]), sort_keys=True), tuple(in_shape))


@builder(TYPE, example=Example((3, 4, 4), {"cls": "torch.nn:Softshrink", "kwargs": '{"lambd": 0.25}',
                                           "in_shape": [3, 4, 4], "out_shape": [3, 4, 4]}))
def _build(p: Params, xs: list[Shape]) -> Call:
    out, _ = probe(p, xs[0])
    if list(out[1:]) != list(p["out_shape"]):
        raise ValueError(f"{p['cls']} gives shape {list(out[1:])} per sample, the node records {p['out_shape']}")
    return ImportedCall(resolve(p["cls"]), (), parse_kwargs(p["kwargs"]), ref=p["cls"])


@flop_rule(TYPE)
def _flops(p: Params, xs: list[Shape], out: Shape) -> int:
    return probe(p, xs[0])[1]
