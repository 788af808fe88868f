"""Values computed from neither the input nor a learned weight, computed once at import (issue 23).

``torch.arange`` of a size, a window mask, a buffer reshaped, sin/cos position tables: the catalog has no
layer for each such op, and needs none -- the value is the same for every input. :func:`fold_constants`
computes each on the module's own tensors and leaves a buffer that a ``get_attr`` reads, which the conversion
turns into a Constant node holding it (its values in the graph, not in the weights).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Collection
from typing import Any

import torch
from torch import fx, nn


def fold_constants(gm: fx.GraphModule, skip: Collection[Any] = ()) -> None:
    """What is computed from neither the input nor a learned weight (``torch.arange`` of a size, a window
    mask, a buffer reshaped, sin/cos position tables) computed once now: each value read by the rest of the
    graph becomes a buffer that a get_attr reads (a Constant node). A table written in place before it is read
    (ConViT's ``rel_indices[:, :, :, 2] = indd``: ``copy_`` into a fresh ``torch.zeros``) is computed with its
    writes; a value some other op mutates in place (by the input, a learned weight, or after a read) is left."""
    takes: Callable[[fx.Node], bool] = lambda n: n.op != "call_module" and n.target not in skip  # noqa: E731
    fixed, learned = own_values(gm, takes, writes=True)
    fixed -= learned
    env = _computed(gm, fixed)
    if env is not None and not _writes_precede_reads(gm, fixed, env):
        fixed, learned = own_values(gm, takes)
        fixed -= learned
        env = _computed(gm, fixed)
    if env is None:
        return
    frontier = [n for n in fixed if n.op != "get_attr" and any(u not in fixed for u in n.users)]
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


def _computed(gm: fx.GraphModule, fixed: set[fx.Node]) -> dict[fx.Node, Any] | None:
    """Each fixed value, computed in the graph's order (the module's own tensors copied, so that a write
    changes nothing of the module); None where one cannot be computed now (meta weights...)."""
    env: dict[fx.Node, Any] = {}
    try:
        for n in gm.graph.nodes:
            if n in fixed:
                env[n] = _value(gm, n, env)
    except Exception:  # noqa: BLE001 -- the ops stay
        return None
    return env


def _writes_precede_reads(gm: fx.GraphModule, fixed: set[fx.Node], env: dict[fx.Node, Any]) -> bool:
    """Every in-place write among the fixed values comes before the rest of the graph reads what it wrote
    (a module's own tensor, which the fold leaves unwritten, read by the rest not at all)."""
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    written = [(order[m], _storage(env[m.all_input_nodes[0]])) for m in fixed if mutates(m)]
    if not written:
        return True
    for n in fixed:
        reads = [order[u] for u in n.users if u not in fixed]
        if reads and isinstance(env[n], torch.Tensor) and any(
                where == _storage(env[n]) and (n.op == "get_attr" or at > min(reads)) for at, where in written):
            return False
    return True


def _storage(t: Any) -> int:
    return t.untyped_storage().data_ptr() if isinstance(t, torch.Tensor) else -1


def own_values(gm: fx.GraphModule, takes: Callable[[fx.Node], bool],
               writes: bool = False) -> tuple[set[fx.Node], set[fx.Node]]:
    """(the values computed from the module's own tensors alone, those of them a learned tensor reaches): each
    tensor a ``get_attr`` reads, and each call ``takes`` accepts whose inputs are all such values (a call of a
    module with parameters is learned). A value some op mutates in place, and the op itself, are neither; with
    ``writes``, an in-place write of fixed values into a fixed, unlearned one is fixed too, and so is what it
    writes into, unless another op writes into that as well.
    The one walk behind :func:`fold_constants` (the values no learned tensor reaches) and
    :func:`.computed.fold_computed` (those one does)."""
    fixed: set[fx.Node] = set()
    learned: set[fx.Node] = set()
    mutated = {a for n in gm.graph.nodes if mutates(n) for a in n.all_input_nodes[:1]}
    for n in gm.graph.nodes:
        if mutates(n):
            if writes and takes(n) and all(a in fixed and a not in learned for a in n.all_input_nodes):
                fixed.add(n)
            elif writes and n.all_input_nodes[:1] and n.all_input_nodes[0] in fixed:
                return own_values(gm, takes)  # written by the input or a learned weight: no write folds
            continue
        if n in mutated and not writes:
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
        value = attribute(gm, str(n.target))
        return value.clone() if isinstance(value, torch.Tensor) else value
    args, kwargs = fx.map_arg(n.args, env.__getitem__), fx.map_arg(n.kwargs, env.__getitem__)
    if n.op == "call_method":
        return getattr(args[0], str(n.target))(*args[1:], **kwargs)
    return n.target(*args, **kwargs)  # type: ignore[operator]


def mutates(n: fx.Node) -> bool:
    """An op that changes a tensor in place (an ATen op whose schema says so, ``x.add_()``, ``out=``,
    ``t[i] = v``)."""
    if n.target is operator.setitem:
        return True
    if n.op == "call_method":
        return str(n.target).endswith("_") or "out" in n.kwargs
    schema = getattr(n.target, "_schema", None)
    return n.op == "call_function" and (schema.is_mutable if schema is not None else "out" in n.kwargs)


def attribute(root: nn.Module, path: str) -> Any:
    obj: Any = root
    for part in path.split("."):
        obj = getattr(obj, part, None)
    return obj
