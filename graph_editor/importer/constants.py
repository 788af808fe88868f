"""Values computed from neither the input nor a learned weight, computed once at import (issue 23).

``torch.arange`` of a size, a window mask, a buffer reshaped, sin/cos position tables: the catalog has no
layer for each such op, and needs none -- the value is the same for every input. :func:`fold_constants`
computes each on the module's own tensors and leaves a buffer that a ``get_attr`` reads, which the conversion
turns into a Constant node holding it (its values in the graph, not in the weights).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import torch
from torch import fx, nn


def fold_constants(gm: fx.GraphModule, skip: Collection[Any] = ()) -> None:
    """What is computed from neither the input nor a learned weight (``torch.arange`` of a size, a window
    mask, a buffer reshaped, sin/cos position tables) computed once now: each value read by the rest of the
    graph becomes a buffer that a get_attr reads (a Constant node). A value some op mutates in place is left."""
    fixed, learned = own_values(gm, lambda n: n.op != "call_module" and n.target not in skip)
    fixed -= learned
    frontier = [n for n in fixed if n.op != "get_attr" and any(u not in fixed for u in n.users)]
    if not frontier:
        return
    env: dict[fx.Node, Any] = {}
    try:
        for n in gm.graph.nodes:
            if n in fixed:
                env[n] = _value(gm, n, env)
    except Exception:  # noqa: BLE001 -- a value that cannot be computed now (meta weights...): the ops stay
        return
    for n in sorted(frontier, key=list(gm.graph.nodes).index):
        if not isinstance(env[n], torch.Tensor):
            continue
        stack = n.meta.get("nn_module_stack") or {}
        owner = next(reversed(stack.values()))[0].replace(".", "_") if stack else ""
        name, k = f"{owner}_const" if owner else "const", 2
        while hasattr(gm, name):
            name, k = f"{owner}_const_{k}" if owner else f"const_{k}", k + 1
        gm.register_buffer(name, env[n].detach())
        with gm.graph.inserting_before(n):
            read = gm.graph.get_attr(name)
        read.meta = dict(n.meta)
        n.replace_all_uses_with(read, delete_user_cb=lambda u: u not in fixed)
    for n in reversed(list(gm.graph.nodes)):  # what only computed the folded values
        if n in fixed and not n.users:
            gm.graph.erase_node(n)


def own_values(gm: fx.GraphModule, takes: Callable[[fx.Node], bool]) -> tuple[set[fx.Node], set[fx.Node]]:
    """(the values computed from the module's own tensors alone, those of them a learned tensor reaches): each
    tensor a ``get_attr`` reads, and each call ``takes`` accepts whose inputs are all such values (a call of a
    module with parameters is learned). A value some op mutates in place, and the op itself, are neither.
    The one walk behind :func:`fold_constants` (the values no learned tensor reaches) and
    :func:`.computed.fold_computed` (those one does)."""
    fixed: set[fx.Node] = set()
    learned: set[fx.Node] = set()
    mutated = {a for n in gm.graph.nodes if mutates(n) for a in n.all_input_nodes[:1]}
    for n in gm.graph.nodes:
        if n in mutated or mutates(n):
            continue
        if n.op == "get_attr":
            value = attribute(gm, str(n.target))
            if isinstance(value, torch.Tensor):
                fixed.add(n)
                if isinstance(value, nn.Parameter):
                    learned.add(n)
        elif n.op in ("call_function", "call_method", "call_module") and takes(n) and all(
                a in fixed for a in n.all_input_nodes):
            fixed.add(n)
            own = n.op == "call_module" and any(True for _ in gm.get_submodule(str(n.target)).parameters())
            if own or any(a in learned for a in n.all_input_nodes):
                learned.add(n)
    return fixed, learned


def _value(gm: fx.GraphModule, n: fx.Node, env: dict[fx.Node, Any]) -> Any:
    if n.op == "get_attr":
        return attribute(gm, str(n.target))
    args, kwargs = fx.map_arg(n.args, env.__getitem__), fx.map_arg(n.kwargs, env.__getitem__)
    if n.op == "call_method":
        return getattr(args[0], str(n.target))(*args[1:], **kwargs)
    return n.target(*args, **kwargs)  # type: ignore[operator]


def mutates(n: fx.Node) -> bool:
    """An op that changes a tensor in place (an ATen op whose schema says so, ``x.add_()``, ``out=``)."""
    if n.op == "call_method":
        return str(n.target).endswith("_") or "out" in n.kwargs
    schema = getattr(n.target, "_schema", None)
    return n.op == "call_function" and (schema.is_mutable if schema is not None else "out" in n.kwargs)


def attribute(root: nn.Module, path: str) -> Any:
    obj: Any = root
    for part in path.split("."):
        obj = getattr(obj, part, None)
    return obj
