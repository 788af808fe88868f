"""How a catalog layer becomes a ``torch.nn.Module``, and how that module is written back as source.

A builder gets a node's checked parameters and the inferred input shapes (batch first), so
parameters left empty ("take it from the input") are filled in here, and returns a :class:`Call`:
the module class and its constructor arguments. :func:`make_module` constructs it and keeps the
call on the module, so the source writer is derived from the builder: the exported ``model.py``
constructs every layer exactly as the studio did. The builders themselves live with their layer
family in :mod:`graph_editor.building.ops`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from torch import nn

from ..model.registry import Registry

Shape = tuple[int, ...]
Params = dict[str, Any]  # a node's checked parameters


@dataclass(frozen=True)
class Call:
    """``cls(*args, **kwargs)``: how a builder constructs a module; its arguments are plain literals."""

    cls: type[nn.Module]
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)

    def make(self) -> nn.Module:
        module = self.cls(*self.args, **self.kwargs)
        module.__dict__[_CALL] = self  # plain attribute: not a parameter, buffer or submodule
        return module

    def source(self) -> str:
        """The call as Python, e.g. ``nn.Linear(400, 120, bias=True)``."""
        parts = [_literal(a) for a in self.args] + [f"{k}={_literal(v)}" for k, v in self.kwargs.items()]
        return f"{class_reference(self.cls)}({', '.join(parts)})"


def call(cls: type[nn.Module], *args: Any, **kwargs: Any) -> Call:
    return Call(cls, args, kwargs)


@dataclass(frozen=True)
class Example:
    """A small input that a layer type accepts (per-sample ``shape``) and the parameters to try it
    with: the per-type tests build, analyse, import, write and export every registered type on it."""

    shape: Shape
    params: dict[str, Any] = field(default_factory=dict)
    dtype: str = "float32"
    codes_below: int | None = None  # the input holds integer codes 0..codes_below-1 (embeddings)


Builder = Callable[[Params, list[Shape]], Call]

_BUILDERS: Registry[str, Builder] = Registry("a builder")
_EXAMPLES: dict[str, Example] = {}  # filled with _BUILDERS, which refuses duplicates first
_CALL = "_studio_call"

# Layer types that the fx graph expresses without a module.
NO_MODULE = frozenset({"Input", "Output"})


def builder(*types: str, example: Example | None = None) -> Callable[[Builder], Builder]:
    """Decorator: ``fn(params, input_shapes) -> Call`` builds the layer types ``types``."""
    def deco(fn: Builder) -> Builder:
        _BUILDERS.add_all(types, fn)
        if example is not None:
            _EXAMPLES.update(dict.fromkeys(types, example))
        return fn
    return deco


def plain_builder(type_: str, cls: type[nn.Module], example: Example) -> None:
    """A layer type whose module takes no arguments (``nn.ReLU()``)."""
    def build(p: dict[str, Any], xs: list[Shape]) -> Call:
        return Call(cls)

    build.__qualname__ = f"plain_builder({type_!r}, {cls.__name__})"
    builder(type_, example=example)(build)


def make_module(type_: str, params: dict[str, Any], in_shapes: list[Shape]) -> nn.Module:
    """The module of one layer; KeyError for a type without a builder."""
    return _BUILDERS[type_](params, in_shapes).make()


def get_builder(type_: str) -> Callable[[dict[str, Any], list[Shape]], nn.Module] | None:
    """``make(params, input_shapes) -> nn.Module`` for ``type_``, or None."""
    build = _BUILDERS.get(type_)
    if build is None:
        return None
    return lambda params, in_shapes: build(params, in_shapes).make()


def get_example(type_: str) -> Example | None:
    return _EXAMPLES.get(type_)


def builder_types() -> set[str]:
    return set(_BUILDERS) | NO_MODULE


def built_call(module: nn.Module) -> Call | None:
    """The constructor call :func:`make_module` made ``module`` with, or None for a foreign module."""
    found = module.__dict__.get(_CALL)
    return found if isinstance(found, Call) and type(module) is found.cls else None


def class_reference(cls: type) -> str:
    """How generated source names ``cls``: ``nn.Linear`` for torch.nn, the bare name for our own."""
    if cls.__module__.startswith("torch.nn.") and getattr(nn, cls.__name__, None) is cls:
        return f"nn.{cls.__name__}"
    if is_own_class(cls):
        return cls.__name__
    raise ValueError(f"{cls.__module__}.{cls.__qualname__} is neither torch.nn nor a Torch Studio layer class")


def is_own_class(cls: type) -> bool:
    """A module class that Torch Studio defines (its source is copied into an exported model.py)."""
    return cls.__module__.startswith("graph_editor.building.") and issubclass(cls, nn.Module)


def _literal(v: Any) -> str:
    if isinstance(v, tuple | list):
        inner = ", ".join(_literal(x) for x in v)
        if isinstance(v, tuple):
            return f"({inner},)" if len(v) == 1 else f"({inner})"
        return f"[{inner}]"
    if v is None or isinstance(v, bool | int | float | str):
        return repr(v)
    raise ValueError(f"constructor argument {v!r} is not a literal")


def or_input(value: Any, fallback: Any) -> Any:
    """A parameter left empty takes its value from the input (``in_features``, ``num_features``...)."""
    return fallback if value is None else value
