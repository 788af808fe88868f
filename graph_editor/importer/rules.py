"""What a traced ``torch.fx`` node becomes in the catalog: the registries of import rules.

A module rule reads the module's attributes; a function rule has the signature of the torch
function it stands for, so fx's positional and keyword arguments bind to it exactly as they
did to torch; a call rule is a module rule that also gets the call's arguments (attention called
as ``attn(x, x, x)``). A rule returns a :class:`Mapped` layer, or raises :class:`Unmappable` with
the reason (e.g. ``padding_mode='reflect'``). The rules themselves live with their layer family
in :mod:`graph_editor.building.ops`; a second rule for the same class or function is refused.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import getitem
from typing import Any

import torch.nn.functional as F
from torch import fx, nn

from ..building.modules import is_own_class
from ..model.registry import Registry


class Unmappable(Exception):
    """This node has no catalog equivalent; the message says why."""


@dataclass
class Mapped:
    """A catalog layer for one fx node: its type, parameters and tensor inputs, in order.

    ``prefix`` is where the module's state_dict keys go inside the built module (the
    catalog's Embedding wraps ``nn.Embedding`` as ``.embedding``, for instance).
    """

    type: str
    params: dict[str, Any] = field(default_factory=dict)
    inputs: list[fx.Node] = field(default_factory=list)
    prefix: str = ""
    state: dict[str, Any] | None = None  # the node's weights where they are not the module's state_dict (Program)


ModuleRule = Callable[[Any, list[fx.Node]], Mapped]  # reads a module of the class it is registered for
FunctionRule = Callable[..., Mapped]
MODULE_RULES: Registry[type[nn.Module], ModuleRule] = Registry("an import rule")
CALL_RULES: Registry[type[nn.Module], FunctionRule] = Registry("an import call rule")
FUNCTION_RULES: Registry[Any, FunctionRule] = Registry("an import rule")
METHOD_RULES: Registry[str, FunctionRule] = Registry("an import rule for the tensor method")
# Module rules for other libraries' classes, keyed by the class's dotted name (``timm.layers.drop.DropPath``):
# registering them imports nothing (timm and torchvision take seconds to import); a class matches by name.
LIBRARY_RULES: Registry[str, ModuleRule] = Registry("an import rule for the library class")
LIBRARY_FUNCTIONS: Registry[str, FunctionRule] = Registry("an import rule for the library function")


def module_rule(*classes: type[nn.Module]) -> Callable[[ModuleRule], ModuleRule]:
    """Decorator: ``fn(module, inputs) -> Mapped`` imports a call ``module(x)`` of these classes."""
    def deco(fn: ModuleRule) -> ModuleRule:
        return MODULE_RULES.add_all(classes, fn)
    return deco


GraphFold = Callable[[fx.GraphModule], None]
FOLDS: Registry[str, GraphFold] = Registry("an import fold")


def graph_fold(name: str) -> Callable[[GraphFold], GraphFold]:
    """Decorator: ``fn(gm)`` rewrites the traced graph before it is converted, turning a parameter read
    in forward and the op that uses it (``x * self.gamma``, ``F.prelu(x, self.weight)``) into a call
    of one module, so it imports as one layer holding that parameter."""
    def deco(fn: GraphFold) -> GraphFold:
        return FOLDS.add(name, fn)
    return deco


def free_module_path(gm: fx.GraphModule, path: str) -> str:
    """``path`` (or ``path_2``...) unused in ``gm``, for a module a fold adds: inside a container that
    tracing made (plain ``nn.Module``), never inside one of the user's own modules, which
    ``add_submodule`` would change; at the top level where the container is the user's."""
    parent, _, name = path.rpartition(".")
    try:
        owner = gm.get_submodule(parent) if parent else gm
    except AttributeError:
        owner = None
    if owner is None or (owner is not gm and type(owner) is not nn.Module):
        parent, name, owner = "", path.replace(".", "_"), gm
    base, i = name, 2
    while hasattr(owner, name):
        name, i = f"{base}_{i}", i + 1
    return f"{parent}.{name}" if parent else name


def parameter_read(gm: fx.GraphModule, node: Any) -> Any:
    """The parameter ``node`` reads (a ``get_attr`` read nowhere else), or None."""
    if not isinstance(node, fx.Node) or node.op != "get_attr" or len(node.users) != 1:
        return None
    try:
        return gm.get_parameter(str(node.target))
    except AttributeError:
        return None


def library_rule(*names: str) -> Callable[[ModuleRule], ModuleRule]:
    """Decorator: a module rule for another library's classes, named ``package.module.Class`` as
    ``cls.__module__`` and ``cls.__qualname__`` spell them (torchvision's StochasticDepth, timm's DropPath)."""
    def deco(fn: ModuleRule) -> ModuleRule:
        return LIBRARY_RULES.add_all(names, fn)
    return deco


def library_function_rule(*names: str) -> Callable[[FunctionRule], FunctionRule]:
    """Decorator: a function rule for another library's functions, named ``package.module.function``
    (torchvision's ``stochastic_depth``, timm's ``drop_path``); see :func:`library_functions`."""
    def deco(fn: FunctionRule) -> FunctionRule:
        return LIBRARY_FUNCTIONS.add_all(names, fn)
    return deco


def library_functions() -> tuple[Callable[..., Any], ...]:
    """The registered library functions whose library is loaded (a model that calls one has loaded it),
    each now with its rule in FUNCTION_RULES: the tracer keeps their calls whole (fx's autowrap), where
    it would otherwise trace into them (and, in eval, see nothing of a stochastic depth)."""
    found = []
    for name, rule in LIBRARY_FUNCTIONS.items():
        module, _, attr = name.rpartition(".")
        fn = getattr(sys.modules.get(module), attr, None)
        if not callable(fn):
            continue
        if fn not in FUNCTION_RULES:
            FUNCTION_RULES.add(fn, rule)
        found.append(fn)
    return tuple(found)


def _own_rule(cls: type) -> tuple[Any, bool] | None:
    """The rule registered for exactly ``cls`` (by class, or by name for a library's class), and
    whether it is a call rule."""
    if cls in CALL_RULES:
        return CALL_RULES[cls], True
    rule = MODULE_RULES.get(cls) or LIBRARY_RULES.get(f"{cls.__module__}.{cls.__qualname__}")
    return (rule, False) if rule is not None else None


def call_rule(*classes: type[nn.Module]) -> Callable[[FunctionRule], FunctionRule]:
    """Decorator: ``fn(module, *args, **kwargs) -> Mapped`` imports a call of these classes with any
    arguments (``attn(x, x, x, need_weights=False)``)."""
    def deco(fn: FunctionRule) -> FunctionRule:
        return CALL_RULES.add_all(classes, fn)
    return deco


def function_rule(*targets: Any, methods: tuple[str, ...] = ()) -> Callable[[FunctionRule], FunctionRule]:
    """Decorator: a rule with the signature of the torch functions ``targets`` (and tensor ``methods``).

    Targets may repeat where torch aliases one function under two names (``F.relu_`` is ``torch.relu_``).
    """
    def deco(fn: FunctionRule) -> FunctionRule:
        unique = list({id(t): t for t in targets}.values())
        taken = [m for m in methods if m in METHOD_RULES]  # checked first: all of the rule or none of it
        if taken:
            METHOD_RULES.add(taken[0], fn)  # raises, naming the rule that holds it
        FUNCTION_RULES.add_all(unique, fn)
        METHOD_RULES.add_all(methods, fn)
        return fn
    return deco


def leaf_classes() -> tuple[type[nn.Module], ...]:
    """Our own layer classes that import rules read: leaves when tracing, so that a built graph
    imports back as itself instead of as the ops inside them."""
    return tuple(c for c in MODULE_RULES if is_own_class(c))


@dataclass
class Step:
    """One catalog node of a module call: the submodule it reads (``""``: the called module itself) and
    its rule (``call`` rules get the call's arguments, module rules the input node)."""

    child: str
    module: nn.Module
    rule: Any
    call: bool


def rule_for(cls: type[nn.Module]) -> tuple[Any, bool] | None:
    """The rule for modules of ``cls`` and whether it is a call rule: the class's own, or the nearest
    ancestor's when ``cls`` keeps that ancestor's ``forward`` (a subclass that only adds methods or
    changes ``__init__``, such as a library's ``Conv2d`` with a default padding)."""
    for base in cls.__mro__:
        found = _own_rule(base)
        if found is not None:
            return found if getattr(cls, "forward", None) is getattr(base, "forward", None) else None
    return None


# The functional call each layer class's own forward makes: how a subclass that overrides forward is
# recognised as "the layer, then some of its child modules" (timm's BatchNormAct2d: batch norm, drop, act).
LAYER_CALLS: dict[type[nn.Module], tuple[Any, ...]] = {
    nn.BatchNorm1d: (F.batch_norm,), nn.BatchNorm2d: (F.batch_norm,), nn.Linear: (F.linear,),
    nn.LayerNorm: (F.layer_norm,), nn.GroupNorm: (F.group_norm,), nn.Conv1d: (F.conv1d,), nn.Conv2d: (F.conv2d,),
}
_SIZE_CHECKS = frozenset({"getattr", "eq", "ne", "lt", "le", "gt", "ge", "_assert", "size", "dim"})


def module_steps(module: nn.Module) -> list[Step] | None:
    """The catalog nodes a call of ``module`` becomes, or None when no rule covers it (trace into it).

    A class with a rule (its own or an unchanged ancestor's) is one step. A subclass of a layer class
    whose ``forward`` calls the layer's functional op and then child modules one after another
    becomes the layer followed by those children (``nn.Identity`` children left out), each child
    under its own rule; the forward is read from its fx trace, in the module's current mode.
    """
    found = rule_for(type(module))
    if found is not None:
        return [Step("", module, found[0], found[1])]
    base = next((c for c in type(module).__mro__[1:] if c in LAYER_CALLS and c in MODULE_RULES), None)
    if base is None:
        return None
    children = _layer_then_children(module, LAYER_CALLS[base])
    if children is None:
        return None
    steps = [Step("", module, MODULE_RULES.get(base), False)]
    for name in children:
        child = module.get_submodule(name)
        if type(child) is nn.Identity:
            continue
        found = rule_for(type(child))
        if found is None or found[1]:
            return None
        steps.append(Step(name, child, found[0], False))
    return steps


def _layer_then_children(module: nn.Module, calls: tuple[Any, ...]) -> list[str] | None:
    """The children ``module.forward`` applies after its layer call, in order, or None when the
    forward does anything else with the tensor."""
    class Shallow(fx.Tracer):
        def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
            return m is not module

    try:
        graph = Shallow().trace(module)
    except Exception:  # untraceable forward: not the simple pattern
        return None
    nodes = list(graph.nodes)
    inputs = [n for n in nodes if n.op == "placeholder"]
    output = nodes[-1]
    if len(inputs) != 1 or output.op != "output" or not isinstance(output.args[0], fx.Node):
        return None
    path, node = [], output.args[0]
    while node.op == "call_module":  # walk back from the output through the child calls
        if len(node.args) != 1 or node.kwargs or not isinstance(node.args[0], fx.Node):
            return None
        path.append(str(node.target))
        node = node.args[0]
    if node.op != "call_function" or node.target not in calls or not node.args or node.args[0] is not inputs[0]:
        return None
    own = {name for name, _ in module.named_parameters(recurse=False)} | {
        name for name, _ in module.named_buffers(recurse=False)}
    used = {node, output, inputs[0], *(n for n in nodes if n.op == "call_module" and str(n.target) in path)}
    for n in nodes:
        if n in used or (n.op == "get_attr" and str(n.target) in own):
            continue
        name = getattr(n.target, "__name__", str(n.target))
        if n.op not in ("call_function", "call_method") or name not in _SIZE_CHECKS:
            return None  # anything else touches the tensor: not the layer then its children
    return path[::-1]


def plain(type_: str) -> ModuleRule:
    """A module rule for a class without hyper-parameters."""
    return lambda m, xs: Mapped(type_, {}, xs)


def attributes(type_: str, *names: str) -> ModuleRule:
    """A module rule whose parameters are the module's attributes of the same names."""
    return lambda m, xs: Mapped(type_, {n: getattr(m, n) for n in names}, xs)


def unary(type_: str) -> FunctionRule:
    """A function rule for ``f(x)`` without parameters (``F.relu(x, inplace=True)`` too)."""
    return lambda input, *args, inplace=False, **kwargs: Mapped(type_, {}, [tensor(input)])


def pair(v: Any) -> list[int]:
    return [int(v), int(v)] if isinstance(v, int) else [int(x) for x in v]


def tensor(x: Any, what: str = "input") -> fx.Node:
    """``x`` as a traced tensor, or Unmappable when a constant stands where a tensor flows."""
    if not isinstance(x, fx.Node):
        raise Unmappable(f"its {what} is a constant ({x!r}), not a tensor")
    return x


def const(value: Any, name: str) -> Any:
    """``value`` as a layer parameter, or Unmappable when it is computed while tracing."""
    if isinstance(value, fx.Node):
        raise Unmappable(f"{name} is computed at run time; only constants map to a layer parameter")
    return value


def static_ints(value: Any, name: str) -> Any:
    """``value`` with each size computed from tensor shapes (``y.shape[-2]``) replaced by its value at the
    import's input shape, as torch.export specialises it; Unmappable where a value is not known."""
    if isinstance(value, list | tuple):
        return type(value)(static_ints(v, name) for v in value)
    if isinstance(value, fx.Node):
        if "static" not in value.meta:
            raise Unmappable(f"{name} is computed at run time from something other than tensor sizes")
        if _reads_batch(value):
            raise Unmappable(f"{name} is computed from the batch size, which a graph does not fix")
        return int(value.meta["static"])
    return value


def _reads_batch(size: fx.Node) -> bool:
    """Whether a size computed while tracing reads a tensor's batch dimension (``x.shape[0]``, ``x.size(0)``,
    ``len(x)``) anywhere on its way."""
    stack, seen = [size], set()
    while stack:
        n = stack.pop()
        if n in seen or "val" in n.meta:  # a tensor: the sizes read from it are what is checked
            continue
        seen.add(n)
        first = n.args[1] if len(n.args) > 1 else None
        source = n.args[0] if n.args else None
        if n.target is len or n.op == "call_method" and n.target == "size" and first == 0:
            return True
        if n.target is getitem and first == 0 and isinstance(source, fx.Node) and (
                source.target is getattr and source.args[1] == "shape"
                or source.op == "call_method" and source.target == "size" and len(source.args) == 1):
            return True
        stack.extend(n.all_input_nodes)
    return False


def permute_dims(dims: list[int], rank: int) -> Mapped:
    """A permutation of all dims (batch included) as the catalog's per-sample Permute; the
    batch must stay first."""
    dims = [d % rank for d in dims]
    if sorted(dims) != list(range(rank)) or dims[0] != 0:
        raise Unmappable(f"permute {dims} moves the batch dimension")
    return Mapped("Permute", {"dims": [d - 1 for d in dims[1:]]})
