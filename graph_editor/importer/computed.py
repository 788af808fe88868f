"""Values computed from the model's learned tensors alone, as Computed nodes (issue 23).

SwinV2's ``clamp(logit_scale, max=log(100)).exp()``, BEiT's ``cat((q_bias, zeros_like(v_bias), v_bias))``, a
relative-position bias from an MLP over a fixed coordinates table: no input reaches them, but a parameter does,
so they cannot be computed once like :func:`.constants.fold_constants`' values (training would stop changing
them). :func:`fold_computed` records each such value's ops with ``make_fx`` (ATen ops, whatever spelling the
code used) as the recipe of one :class:`~..building.ops.computed.ComputedTensor`, which holds those parameters,
and the graph reads that module instead. It runs after the import folds, so a gather a catalog layer expresses
(RelativePositionBias) stays that layer.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import fx, nn
from torch.func import functional_call, functionalize
from torch.fx.experimental.proxy_tensor import make_fx

from ..building.modules import Call
from ..building.ops.computed import (
    OPS,
    ComputedTensor,
    Recipe,
    RecipeError,
    encode_arg,
    encode_recipe,
    leading_one,
)
from .constants import attribute, own_values
from .rules import free_module_path

_RESERVED = frozenset(dir(nn.Module()))
# Users that read a value of shape [S] as [1, S] alike, where their other operand has more dims than S
_BROADCASTING = {operator.add, operator.sub, operator.mul, operator.truediv, torch.add, torch.sub, torch.mul,
                 torch.div, "add", "sub", "mul", "div"}


def fold_computed(gm: fx.GraphModule) -> None:
    """Each value computed from learned tensors (and fixed ones) but not the input becomes a call of a
    ComputedTensor holding those tensors; a value whose parameters something else also reads, or whose users
    would not read ``[1, *shape]`` as they read its shape, is left as it was."""
    fixed, learned = own_values(gm, lambda n: bool(n.all_input_nodes) and not _pick(n))
    frontier = [n for n in gm.graph.nodes if n in learned and n.op != "get_attr" and any(
        u not in fixed for u in n.users)]
    frontier = _cut(gm, frontier, learned)
    subs = {f: _ancestors(f) for f in frontier}
    for f, sub in subs.items():
        others = set().union(*(s for g, s in subs.items() if g is not f))
        shared = [n for n in sub if n in others and not (n.op == "get_attr" and n not in learned)]
        outside = [n for n in sub if n is not f and any(u not in sub for u in n.users)]
        if shared or outside:
            continue
        try:
            module, value = _module(gm, sub, f)
        except Exception:  # noqa: BLE001 -- an op outside the recipe's list, an argument it cannot hold, fixed
            continue       # values on meta (a model built there): left as it was
        if not _reads_alike(f, value):
            continue
        path = _path(gm, sub, learned)
        gm.add_submodule(path, module)
        with gm.graph.inserting_before(f):
            call = gm.graph.call_module(path, ())
        call.meta = {k: v for k, v in f.meta.items() if k != "val"}
        f.replace_all_uses_with(call, delete_user_cb=_outside(sub))
        if not (value.dim() >= 2 and value.shape[0] == 1):  # else the node's value is the value itself
            _picks_as_unbind(gm, call)
        for n in reversed(list(gm.graph.nodes)):
            if n in sub and not n.users:
                gm.graph.erase_node(n)
    gm.recompile()


def _outside(sub: set[fx.Node]) -> Callable[[fx.Node], bool]:
    return lambda u: u not in sub


def _cut(gm: fx.GraphModule, frontier: list[fx.Node], learned: set[fx.Node]) -> list[fx.Node]:
    """Two values the rest of the graph reads that share a learned tensor (ConViT's ``1 - sigmoid(g)`` and
    ``sigmoid(g)`` of one ``g = gating.view(1, -1, 1, 1)``) become the last value they share where it holds all
    they share: that one is the Computed node, the ops after it read it as they read any node's output."""
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    while True:
        subs = {f: _ancestors(f) for f in frontier}
        pair = next(((f, g) for f in frontier for g in frontier if f is not g and subs[f] & subs[g] & learned), None)
        if pair is None:
            return frontier
        shared = subs[pair[0]] & subs[pair[1]] & learned
        top = max(shared, key=order.__getitem__)
        if not shared <= _ancestors(top):
            return frontier  # no one value holds it all: both left as they were
        frontier = [h for h in frontier if h not in pair] + ([top] if top.op != "get_attr" else [])
        frontier.sort(key=order.__getitem__)


def _path(gm: fx.GraphModule, sub: set[fx.Node], learned: set[fx.Node]) -> str:
    """Where the node's module goes: beside its first parameter, named after it (``attn.logit_scale_computed``,
    ``attn.cpb_mlp_computed``)."""
    order = [n for n in gm.graph.nodes if n in sub]  # the graph's order: the same name on every import
    paths = [str(n.target) for n in order if n in learned and n.op == "get_attr"]
    first = (paths or [str(n.target) for n in order if n.op == "call_module"])[0].split(".")
    while len(first) > 1 and first[-1].isdigit():  # cpb_mlp.0: named after the MLP
        first.pop()
    owner, _, leaf = ".".join(first).rpartition(".")
    return free_module_path(gm, f"{owner}.{leaf}_computed" if owner else f"{leaf}_computed")


def _pick(n: fx.Node) -> bool:
    """``v[i]`` of a tensor: one value of several (EfficientViM's ``alpha[0]``, EfficientViT's ``bias[head]``)
    read from one computed tensor; an unbind of the Computed node's output along its dim 1 gives them all."""
    return n.target is operator.getitem and _index(n) is not None and isinstance(n.args[0], fx.Node) and (
        n.args[0].op != "call_function" or n.args[0].target not in _MULTI)


def _index(n: fx.Node) -> int | None:
    """``i`` of ``v[i]`` (or ``v[(i,)]``, as the exported program's ``aten.select`` reads), else None."""
    index = n.args[1]
    if isinstance(index, tuple) and len(index) == 1:
        index = index[0]
    return index if isinstance(index, int) and not isinstance(index, bool) else None


_MULTI = {torch.split, torch.chunk, torch.unbind, torch.ops.aten.split.Tensor, torch.ops.aten.unbind.int,
          torch.ops.aten.split_with_sizes.default, torch.ops.aten.chunk.default}


def _picks_as_unbind(gm: fx.GraphModule, call: fx.Node) -> None:
    """``v[i]`` of the value ``call`` gives as ``[1, *shape]``: part ``i`` of its unbind along dim 1, which is
    ``v[i]`` with the batch dimension of 1 in front."""
    picks = [u for u in call.users if _pick(u)]
    if not picks:
        return
    with gm.graph.inserting_after(call):
        parts = gm.graph.call_function(torch.unbind, (call, 1))
    for u in picks:
        u.args = (parts, _index(u))


def _ancestors(end: fx.Node) -> set[fx.Node]:
    seen: set[fx.Node] = set()
    stack = [end]
    while stack:
        n = stack.pop()
        if n not in seen:
            seen.add(n)
            stack.extend(n.all_input_nodes)
    return seen


def _reads_alike(f: fx.Node, value: torch.Tensor) -> bool:
    """Whether every reader of ``f`` (of ``value``) gets the same from ``[1, *shape]`` as from its own shape:
    nothing changes where the value already leads with 1; else an element-wise op whose other operand has more
    dims (unknown before an fx trace's shapes are propagated: the import's shape check then compares every
    node's shape with PyTorch's), or the mask of scaled_dot_product_attention."""
    if value.dim() >= 2 and value.shape[0] == 1:
        return True
    for u in f.users:
        if _pick(u) and u.args[0] is f:
            index = _index(u)
            if index is None or not -value.shape[0] <= index < value.shape[0] or not _reads_alike(u, value[index]):
                return False
            continue  # an unbind picks it (_picks_as_unbind), as [1, *shape] read alike
        if u.op == "call_function" and u.target is F.scaled_dot_product_attention:
            if f in u.args[:3]:
                return False
            continue
        if u.target in (torch.matmul, operator.matmul) and value.dim() >= 2 and len(u.args) == 2:
            pass  # [..., M, K] @ [1, *shape]: its dims before the last two broadcast as its own
        elif u.target not in _BROADCASTING or len(u.args) != 2:
            return False
        other = u.args[1] if u.args[0] is f else u.args[0]
        other_value = other.meta.get("val") if isinstance(other, fx.Node) else None
        if not isinstance(other, fx.Node) or isinstance(other_value, torch.Tensor) and other_value.dim() <= value.dim():
            return False
    return True


def _module(gm: fx.GraphModule, sub: set[fx.Node], end: fx.Node) -> tuple[ComputedTensor, torch.Tensor]:
    """The ComputedTensor whose recipe is ``sub``'s ops as ATen ops, holding their tensors' values, and ``end``'s
    value; ValueError where the module does not reproduce that value."""
    order = [n for n in gm.graph.nodes if n in sub]
    leaves: dict[str, torch.Tensor] = {}  # the tensors the ops read, by their path in gm
    for n in order:
        if n.op == "get_attr":
            leaves[str(n.target)] = attribute(gm, str(n.target))
        elif n.op == "call_module":
            mod = gm.get_submodule(str(n.target))
            leaves.update({f"{n.target}.{k}": v for k, v in [*mod.named_parameters(), *mod.named_buffers()]})
    paths = list(leaves)

    def run(*tensors: torch.Tensor) -> torch.Tensor:
        ts = dict(zip(paths, tensors, strict=True))
        env: dict[fx.Node, Any] = {}
        for n in order:
            args, kwargs = fx.map_arg((n.args, n.kwargs), env.__getitem__)
            if n.op == "get_attr":
                env[n] = ts[str(n.target)]
            elif n.op == "call_module":
                mod = gm.get_submodule(str(n.target))
                own = {k: ts[f"{n.target}.{k}"] for k, _ in [*mod.named_parameters(), *mod.named_buffers()]}
                env[n] = functional_call(mod, own, tuple(args), kwargs)
            elif n.op == "call_method":
                env[n] = getattr(args[0], str(n.target))(*args[1:], **kwargs)
            else:
                env[n] = n.target(*args, **kwargs)
        return env[end]

    values = [leaves[p] for p in paths]
    traced = make_fx(functionalize(run), tracing_mode="real")(*values)  # in-place ops (ReLU(inplace=True)): plain
    recipe, learned = _recipe(traced, paths, values)
    value = run(*values).detach()
    want = leading_one(value)
    with torch.device(values[0].device):
        module = Call(ComputedTensor, (list(want.shape[1:]), encode_recipe(recipe))).make()
    assert isinstance(module, ComputedTensor)
    with torch.no_grad():
        for name, tensor in learned.items():
            module.get_parameter(name).copy_(tensor)
        got = module()
    if got.shape != want.shape or not want.is_meta and not torch.equal(got, want):
        raise ValueError("the recipe does not reproduce the value")
    return module, value


def _recipe(traced: fx.GraphModule, paths: list[str], values: list[torch.Tensor]) -> tuple[Recipe,
                                                                                          dict[str, torch.Tensor]]:
    """The recipe of ``traced``'s ATen ops (its inputs the tensors at ``paths``) and the learned values by name."""
    names: list[str] = []
    tensors: list[list[Any]] = []
    fixed: dict[str, torch.Tensor] = {}
    learned: dict[str, torch.Tensor] = {}
    index: dict[fx.Node, int] = {}

    def add(node: fx.Node, name: str, value: torch.Tensor) -> None:
        name = base = name.replace(".", "_") if name.replace(".", "_").isidentifier() else f"t{len(names)}"
        k = 2
        while name in names or name in _RESERVED:
            name, k = f"{base}_{k}", k + 1
        names.append(name)
        kind = "learned" if isinstance(value, nn.Parameter) else "fixed"
        tensors.append([name, kind, str(value.dtype).removeprefix("torch."), list(value.shape)])
        (learned if kind == "learned" else fixed)[name] = value.detach()
        index[node] = len(names) - 1

    placeholders = [n for n in traced.graph.nodes if n.op == "placeholder"]
    prefix = _common_prefix(paths)
    for n, path, value in zip(placeholders, paths, values, strict=True):
        add(n, path[len(prefix):], value)
    for n in traced.graph.nodes:
        if n.op == "get_attr":
            add(n, f"c_{n.target}", attribute(traced, str(n.target)))
    steps: list[list[Any]] = []
    out = -1
    for n in traced.graph.nodes:
        if n.op == "call_function":
            name = "getitem" if n.target is operator.getitem else str(n.target)
            if name not in OPS:
                raise RecipeError(f"{name} is not among the ops a Computed node may run")
            steps.append([name, encode_arg(list(n.args), index), {k: encode_arg(v, index) for k, v in n.kwargs.items()}])
            index[n] = len(names) + len(steps) - 1
        elif n.op == "output":
            out = index[n.args[0]]
    return Recipe(tensors, steps, out, fixed), learned


def _common_prefix(paths: list[str]) -> str:
    """The module path all ``paths`` share (``layers.0.attn.``), so the node's tensors get short names."""
    parts = [p.split(".")[:-1] for p in paths]
    common: list[str] = []
    for level in zip(*parts, strict=False):
        if len(set(level)) != 1:
            break
        common.append(level[0])
    return ".".join(common) + "." if common else ""
