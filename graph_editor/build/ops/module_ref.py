"""The opaque Module node's PyTorch side: import the class, construct it, count it, write it.

The importer keeps a module it cannot map as one Module node (see
:func:`module_node`): the class as ``package.module:Class``, the constructor arguments read back
from the module's attributes (``inspect.signature`` against ``vars``), checked by constructing a
fresh module on ``meta`` and comparing its weights' shapes and its plain attributes with the
original's. Its weights travel as the node's state like any other node's.

Building imports the named module: it runs that installed package's code, never text from the
graph file (the reference is a dotted name checked against a pattern, the arguments JSON literals),
and the class must be an ``nn.Module``. Shapes and FLOPs come from running the module on the
``meta`` device under ``FlopCounterMode``; a module that reads a tensor's value (``.item()``)
cannot run there and is run once on a small real input instead.
"""

from __future__ import annotations

import importlib
import inspect
import itertools
import json
import sys
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import torch
from torch import fx, nn
from torch.utils.flop_counter import FlopCounterMode

from ...model.errors import ParamError
from ...model.layers.module_ref import parse_class, parse_kwargs
from ..analysis import flop_rule
from ..import_rules import Mapped, Unmappable
from ..modules import Call, Example, Params, Shape, builder

TYPE = "Module"
# Layer types whose import rule is the importer's fallback, not a rule for a class of their own.
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


def class_ref(cls: type) -> str:
    """``package.module:Class`` for ``cls``, or Unmappable when no import can find it again."""
    ref = f"{_public_module(cls)}:{cls.__qualname__}"
    if "<locals>" in cls.__qualname__ or cls.__module__ == "__main__":
        raise Unmappable(f"{ref} is defined where no import can find it (a function's locals or __main__)")
    try:
        found = resolve(ref)
    except ValueError as exc:
        raise Unmappable(str(exc)) from None
    if found is not cls:
        raise Unmappable(f"{ref} names another class than the module's")
    return ref


def _public_module(cls: type) -> str:
    """The shortest loaded package that exports ``cls`` under its name (``torch.nn`` for
    ``torch.nn.modules.activation.Softshrink``), else the module that defines it."""
    parts = cls.__module__.split(".")
    for depth in range(1, len(parts)):
        module = sys.modules.get(".".join(parts[:depth]))
        if module is not None and getattr(module, cls.__qualname__, None) is cls:
            return module.__name__
    return cls.__module__


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


# ------------------------------------------------------------------ from a module to a node
def module_node(module: nn.Module, n: fx.Node, values: dict[fx.Node, Any]) -> Mapped:
    """The Module node for the call ``n`` of ``module``, which the catalog cannot map; Unmappable
    saying why it cannot be one either (the importer then tries the module around it)."""
    inputs = [*n.args, *n.kwargs.values()]
    if len(inputs) != 1 or not isinstance(inputs[0], fx.Node) or not isinstance(values.get(inputs[0]), torch.Tensor):
        raise Unmappable("a Module node takes exactly one tensor input")
    out = values.get(n)
    if not isinstance(out, torch.Tensor):
        raise Unmappable(f"a Module node gives one tensor; {type(module).__name__} returns {type(out).__name__}")
    ref = class_ref(type(module))
    kwargs = constructor_kwargs(module)
    return Mapped(TYPE, {"cls": ref, "kwargs": json.dumps(kwargs, sort_keys=True),
                         "in_shape": list(values[inputs[0]].shape[1:]), "out_shape": list(out.shape[1:])}, [inputs[0]])


def constructor_kwargs(module: nn.Module) -> dict[str, Any]:
    """The arguments that construct ``module`` again, read from its attributes of the same names and
    checked by constructing it on ``meta``; Unmappable naming the argument that cannot be recovered."""
    cls = type(module)
    kwargs: dict[str, Any] = {}
    missing: dict[str, str] = {}  # required argument -> why no attribute gives it
    for name, param in list(inspect.signature(cls.__init__).parameters.items())[1:]:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or name in ("device", "dtype"):
            continue
        value = getattr(module, name, _MISSING)
        known = value is not _MISSING and _is_literal(value)
        if known and (param.default is param.empty or _plain(value) != _plain(param.default)):
            kwargs[name] = _plain(value)
        elif not known and param.default is param.empty:
            missing[name] = "keeps no attribute of that name" if value is _MISSING else \
                f"keeps it as a {type(value).__name__}, not a literal"
    if missing:
        return _infer_sizes(module, kwargs, missing)
    _check_rebuilds(module, kwargs)
    return kwargs


_MAX_MISSING = 2  # required arguments searched for among the weights' sizes (candidates ** missing rebuilds)


def _infer_sizes(module: nn.Module, kwargs: dict[str, Any], missing: dict[str, str]) -> dict[str, Any]:
    """Required arguments the module keeps no attribute for, found among its weights' sizes: a width
    such as torchvision's ``ShiftedWindowAttention(dim, ...)``, which stores only the layers built from
    it (``qkv = Linear(dim, 3 * dim)``). Each candidate is checked like any recovered argument, by
    constructing the class on ``meta`` (same weights' shapes, same plain attributes, same submodules);
    the first that rebuilds the module is taken, the most frequent sizes tried first. Unmappable naming the argument when none does."""
    name = type(module).__qualname__
    first, why = next(iter(missing.items()))
    if len(missing) > _MAX_MISSING:
        raise Unmappable(f"cannot recover argument '{first}' of {name}: the module {why} ({len(missing)} "
                         f"arguments without attributes; at most {_MAX_MISSING} are searched for among its weights' sizes)")
    # The most frequent sizes first: a width is in most of the weights (qkv's, proj's and its bias)
    counts = Counter(int(d) for t in module.state_dict().values() for d in t.shape)
    sizes = sorted(counts, key=lambda d: (-counts[d], d))
    for values in itertools.product(sizes, repeat=len(missing)):
        candidate = {**kwargs, **dict(zip(missing, values, strict=True))}
        try:
            _check_rebuilds(module, candidate)
        except Unmappable:
            continue
        return candidate
    raise Unmappable(f"cannot recover argument '{first}' of {name}: the module {why}, and no size of its "
                     "weights rebuilds it")


_MISSING = object()


def _is_literal(v: Any) -> bool:
    if isinstance(v, list | tuple):
        return all(_is_literal(x) for x in v)
    return isinstance(v, _LITERALS) and not (isinstance(v, float) and v != v)


def _plain(v: Any) -> Any:
    return [_plain(x) for x in v] if isinstance(v, list | tuple) else v


def _check_rebuilds(module: nn.Module, kwargs: dict[str, Any]) -> None:
    """A fresh ``Class(**kwargs)`` must hold the same weights' shapes and plain attributes."""
    name = type(module).__qualname__
    try:
        with torch.device("meta"):
            fresh = type(module)(**kwargs)
    except Exception as exc:
        raise Unmappable(f"{name}(**{kwargs}) from its attributes fails: {type(exc).__name__}: {exc}") from None
    want = {k: tuple(v.shape) for k, v in module.state_dict().items()}
    got = {k: tuple(v.shape) for k, v in fresh.state_dict().items()}
    if want != got:
        diff = sorted(set(want.items()) ^ set(got.items()))[:3]
        raise Unmappable(f"{name}(**{kwargs}) from its attributes holds other weights ({diff})")
    fresh_modules = dict(fresh.named_modules())
    for path, sub in module.named_modules():
        other = fresh_modules.get(path)
        if other is None or type(other) is not type(sub):
            raise Unmappable(f"{name}(**{kwargs}) from its attributes builds another submodule at '{path}'")
        for attr, value in vars(sub).items():
            if attr.startswith("_") or attr == "training" or not _is_literal(value):
                continue
            if _plain(getattr(other, attr, _MISSING)) != _plain(value):
                where = f"{path}.{attr}" if path else attr
                raise Unmappable(f"{name}(**{kwargs}) from its attributes differs in '{where}' "
                                 f"({value!r} in the module)")
