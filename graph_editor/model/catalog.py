"""The layer catalog: one registry that says what every layer type is.

A layer type is declared once, with :func:`layer` on its shape rule::

    @layer("ReLU", "Activation", "Rectified linear unit, max(x, 0).")
    def relu(p, x):
        return x

The catalog is pure data plus pure-Python shape rules, so the editor can check a graph
live without importing torch. The types live in ``layers/<family>.py``; their PyTorch side
(builder, FLOP rule, import rules, source writer) in the mirrored ``graph_editor.building.ops.<family>``,
and a test checks that every type is complete there.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import ParamError, ShapeError
from .registry import Registry

Shape = tuple[int, ...]
ParamValue = int | float | bool | str | list[int]

PARAM_KINDS = ("int", "float", "bool", "choice", "ints", "str")

# The largest integer a parameter may hold (sizes, kernel sizes, dimensions): PyTorch indexes many
# kernels with 32-bit integers, and no layer of a classification network comes near it. A value
# beyond it (``out_features: 1e40`` in a hand-edited file) is refused here, where the node and the
# field are known, rather than overflowing later inside torch.
INT_LIMIT = 2**31 - 1


@dataclass(frozen=True)
class ParamSpec:
    """One parameter of a layer: its type, default, bounds or choices, and a one-line doc.

    ``kind`` is one of ``int``, ``float``, ``bool``, ``choice`` (one of ``choices``),
    ``ints`` (a list of ints; ``length`` fixes its size, a single int is broadcast when
    ``length`` is set) and ``str``.
    """

    name: str
    kind: str
    default: Any
    doc: str = ""
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[Any, ...] = ()
    length: int | None = None
    optional: bool = False  # None is allowed (e.g. Conv bias-free, Reshape's shape)

    def __post_init__(self) -> None:
        if self.kind not in PARAM_KINDS:
            raise ValueError(f"parameter {self.name}: unknown kind {self.kind!r}")

    def check(self, value: Any) -> ParamValue | None:
        """Return ``value`` normalised (e.g. 3 -> [3, 3] for a pair), or raise ParamError."""
        if value is None:
            if self.optional:
                return None
            raise ParamError(f"{self.name} is required", field=self.name)
        checker = getattr(self, f"_check_{self.kind}")
        return checker(value)

    def _bounds(self, v: float) -> None:
        if self.minimum is not None and v < self.minimum:
            raise ParamError(f"{self.name} must be >= {_fmt(self.minimum)}, got {_fmt(v)}", field=self.name)
        if self.maximum is not None and v > self.maximum:
            raise ParamError(f"{self.name} must be <= {_fmt(self.maximum)}, got {_fmt(v)}", field=self.name)

    def _check_int(self, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int | float) or (
            isinstance(value, float) and not value.is_integer()
        ):
            raise ParamError(f"{self.name} must be an integer, got {short_repr(value)}", field=self.name)
        self._limit(int(value))
        self._bounds(int(value))
        return int(value)

    def _limit(self, v: int) -> None:
        if abs(v) > INT_LIMIT:
            raise ParamError(f"{self.name} is absurdly large ({short_repr(v)}; at most {INT_LIMIT:,})", field=self.name)

    def _check_float(self, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not _finite(value):
            raise ParamError(f"{self.name} must be a finite number, got {short_repr(value)}", field=self.name)
        self._bounds(float(value))
        return float(value)

    def _check_bool(self, value: Any) -> bool:
        if not isinstance(value, bool):
            raise ParamError(f"{self.name} must be true or false, got {short_repr(value)}", field=self.name)
        return value

    def _check_choice(self, value: Any) -> Any:
        if value not in self.choices:
            options = ", ".join(repr(c) for c in self.choices)
            raise ParamError(f"{self.name} must be one of {options}, got {short_repr(value)}", field=self.name)
        return value

    def _check_str(self, value: Any) -> str:
        if not isinstance(value, str):
            raise ParamError(f"{self.name} must be text, got {short_repr(value)}", field=self.name)
        return value

    def _check_ints(self, value: Any) -> list[int]:
        if isinstance(value, int) and not isinstance(value, bool) and self.length is not None:
            value = [value] * self.length
        if isinstance(value, str):
            try:
                value = [int(v) for v in value.replace("x", ",").split(",") if v.strip()]
            except ValueError:
                raise ParamError(f"{self.name} must be a list of integers, got {short_repr(value)}",
                                 field=self.name) from None
        if not isinstance(value, list | tuple) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value
        ):
            raise ParamError(f"{self.name} must be a list of integers, got {short_repr(value)}", field=self.name)
        if self.length is not None and len(value) != self.length:
            raise ParamError(f"{self.name} needs {self.length} values, got {len(value)}", field=self.name)
        if not value and self.length is None and not self.optional:
            raise ParamError(f"{self.name} needs at least one value", field=self.name)
        for v in value:
            self._limit(v)
            self._bounds(v)
        return list(value)


def _fmt(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def _finite(value: float) -> bool:
    """``math.isfinite`` that also answers (False) for an integer too large for a float."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def short_repr(value: Any) -> str:
    """``repr`` cut to a readable length (a 5000-digit integer is named by its size, not printed)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**30:
        return f"an integer of {len(str(abs(value))) if abs(value) < 10**4000 else 'over 4000'} digits"
    try:
        text = repr(value)
    except (RecursionError, ValueError):  # nested thousands deep; an integer past the digit limit
        return f"a {type(value).__name__} too large to show"
    return text if len(text) <= 60 else text[:57] + "..."


@dataclass(frozen=True)
class PortSpec:
    """An input or output port. A variadic input takes ``min_count`` or more wires, in order."""

    name: str
    variadic: bool = False
    min_count: int = 1
    doc: str = ""


Params = dict[str, Any]  # a layer's checked parameters, by name
ShapeRule = Callable[[Params, list[Shape]], "Shape | list[Shape]"]  # a list: one shape per output
OutputCount = Callable[[dict[str, Any]], int]


def output_name(index: int) -> str:
    """The name of output ``index`` of a layer with several outputs: ``out``, ``out1``, ``out2``...
    Output 0 is ``out`` as on every other layer, so an edge that names no port takes the first."""
    return "out" if index == 0 else f"out{index}"


_OUTPUT_NAME = re.compile(r"^out([1-9][0-9]{0,5})?$")


def output_index(name: str) -> int | None:
    """The index of output port ``name`` (``out`` -> 0, ``out2`` -> 2), or None for another name."""
    m = _OUTPUT_NAME.match(name) if isinstance(name, str) else None
    return None if m is None else int(m.group(1) or 0)


@dataclass(frozen=True)
class LayerSpec:
    """Everything the editor knows about a layer type."""

    type: str
    category: str
    doc: str
    params: tuple[ParamSpec, ...]
    infer: ShapeRule
    inputs: tuple[PortSpec, ...] = (PortSpec("in"),)
    outputs: tuple[PortSpec, ...] = (PortSpec("out"),)
    display: str = ""
    prefix: str = ""
    key_params: tuple[str, ...] = ()
    output_count: OutputCount | None = None  # several outputs, as many as this says for the params
    _by_name: dict[str, ParamSpec] = field(default_factory=dict, compare=False, repr=False)
    input_names: frozenset[str] = field(default=frozenset(), compare=False, repr=False)
    output_names: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {p.name: p for p in self.params})
        object.__setattr__(self, "input_names", frozenset(p.name for p in self.inputs))
        object.__setattr__(self, "output_names", frozenset(p.name for p in self.outputs))
        if not self.display:
            object.__setattr__(self, "display", self.type)
        if not self.prefix:
            object.__setattr__(self, "prefix", self.type.lower())

    def param(self, name: str) -> ParamSpec:
        try:
            return self._by_name[name]
        except KeyError:
            raise ParamError(f"{self.type} has no parameter '{name}'", field=name) from None

    def has_param(self, name: str) -> bool:
        return name in self._by_name

    def defaults(self) -> dict[str, Any]:
        return {p.name: (list(p.default) if isinstance(p.default, list | tuple) else p.default)
                for p in self.params}

    def check_params(self, params: dict[str, Any]) -> dict[str, Any]:
        """Defaults filled in and every value checked; raises ParamError on the first bad one."""
        unknown = [k for k in params if k not in self._by_name]
        if unknown:
            raise ParamError(f"{self.type} has no parameter '{unknown[0]}'", field=unknown[0])
        out = self.defaults()
        for name, value in params.items():
            out[name] = self._by_name[name].check(value)
        return out

    def input_port(self, name: str) -> PortSpec | None:
        return next((p for p in self.inputs if p.name == name), None)

    def output_port(self, name: str) -> PortSpec | None:
        """The output port ``name``. A layer with several outputs has ``out``, ``out1``... up to what
        its parameters say (see :meth:`outputs_for`); any of those names is a port here, and
        validation reports one beyond the count, naming node and port."""
        if self.output_count is not None:
            return PortSpec(name) if output_index(name) is not None else None
        return next((p for p in self.outputs if p.name == name), None)

    def has_output(self, name: str) -> bool:
        return name in self.output_names or (self.output_count is not None and output_index(name) is not None)

    @property
    def multi_output(self) -> bool:
        return self.output_count is not None

    def outputs_for(self, params: dict[str, Any]) -> tuple[str, ...]:
        """The output port names of a node with these parameters (its fixed outputs for most layers;
        the first only while the parameters are not valid)."""
        if self.output_count is None:
            return tuple(p.name for p in self.outputs)
        try:
            count = self.output_count(self.check_params(params))
        except (ParamError, ShapeError, TypeError, ValueError):
            count = 1
        return tuple(output_name(i) for i in range(max(1, count)))

    @property
    def is_source(self) -> bool:
        return not self.inputs

    @property
    def is_sink(self) -> bool:
        return not self.outputs


_REGISTRY: Registry[str, LayerSpec] = Registry("a layer type")


def register(spec: LayerSpec) -> LayerSpec:
    """Add a layer type to the catalog; a second type of the same name is refused."""
    return _REGISTRY.add(spec.type, spec)


def layer(
    type_: str,
    category: str,
    doc: str,
    params: Sequence[ParamSpec] = (),
    *,
    inputs: Sequence[PortSpec] = (PortSpec("in"),),
    outputs: Sequence[PortSpec] = (PortSpec("out"),),
    display: str = "",
    prefix: str = "",
    key_params: Sequence[str] = (),
    output_count: OutputCount | None = None,
) -> Callable[[ShapeRule], ShapeRule]:
    """Decorator: register the decorated shape rule as the layer type ``type_``.

    The rule receives the checked parameters and one shape (batch dimension first) per
    wired input, and returns the output shape or raises :class:`ShapeError`. A layer with several
    outputs gives ``output_count`` (how many, from the checked parameters) and its rule returns a
    list of shapes, one per output.
    """

    def deco(rule: ShapeRule) -> ShapeRule:
        register(LayerSpec(
            type=type_, category=category, doc=doc, params=tuple(params), infer=rule,
            inputs=tuple(inputs), outputs=tuple(outputs), display=display, prefix=prefix,
            key_params=tuple(key_params), output_count=output_count,
        ))
        return rule

    return deco


def get_layer(type_: str) -> LayerSpec | None:
    _ensure_loaded()
    return _REGISTRY.get(type_)


def all_layers() -> list[LayerSpec]:
    _ensure_loaded()
    return list(_REGISTRY.values())


CATEGORY_ORDER = ("Input / Output", "Core", "Convolution", "Normalisation", "Activation", "Pooling",
                  "Regularisation", "Shape", "Merge", "Transformer")


def categories() -> dict[str, list[LayerSpec]]:
    """Layer types grouped by category in the palette's order; new categories come last."""
    out: dict[str, list[LayerSpec]] = {c: [] for c in CATEGORY_ORDER}
    for spec in all_layers():
        out.setdefault(spec.category, []).append(spec)
    return {c: specs for c, specs in out.items() if specs}


_loaded = False


def _ensure_loaded() -> None:
    global _loaded  # a once-only flag: get_layer runs for every node on every keystroke
    if not _loaded:
        from . import layers  # noqa: F401  (importing the package registers the built-in layers)

        _loaded = True


def shape_error(message: str) -> ShapeError:
    return ShapeError(message)


def fmt_shape(shape: Sequence[int], batch: bool = False) -> str:
    """'16x5x5' for the per-sample part (or the whole shape when ``batch`` is True)."""
    dims = shape if batch else shape[1:]
    return "x".join(str(d) for d in dims) if dims else "scalar"
