"""Import an existing ``nn.Module`` as a graph, through ``torch.fx``.

The module is traced symbolically, run once on the ``meta`` device (no memory, no weights
touched) to learn every tensor's shape, and each traced call becomes a catalog node by the
rules of :mod:`.import_rules`. Anything that does not map is collected, and one
:class:`ModuleImportError` lists every such op with its fx name and where it is in the
source, so a user can fix them all at once. The returned ``state_dict`` is keyed like the
module :func:`~graph_editor.build.fx.build_module` builds, so the weights load straight in.
"""

from __future__ import annotations

import inspect
import linecache
import operator
import os
import re
import sys
import traceback
from dataclasses import dataclass
from typing import Any

import torch
from torch import fx, nn
from torch.func import functional_call

from ..model import Edge, Graph, GraphError, Group, InputSpec, validate
from ..model.block_layout import nested_layout
from ..model.hierarchy import groups_from_paths
from . import layers as L
from .import_rules import (
    FOLDS,
    FUNCTION_RULES,
    METHOD_RULES,
    Mapped,
    Step,
    Unmappable,
    leaf_classes,
    library_functions,
    module_steps,
    permute_dims,
)
from .opaque import widen
from .ops.module_ref import module_node
from .ops.param import import_parameter
from .ops.split import unbind_after_permute

_BATCH = 2  # example batch for shape propagation; 2 so that BatchNorm in training mode accepts it
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep  # with the separator: torchvision is not torch
_HERE = os.path.dirname(__file__) + os.sep
_RESERVED = frozenset(dir(nn.Module()))  # ids that would clash with nn.Module attributes when built


@dataclass(frozen=True)
class Unsupported:
    """One traced op that has no catalog equivalent."""

    node: str  # the fx node's name
    op: str  # what it calls, e.g. "torch.sin" or "nn.LSTM"
    where: str  # module path and source line
    reason: str
    owner: str = ""  # the class whose forward made it, e.g. "timm BatchNormAct2d"

    def __str__(self) -> str:
        head = " ".join(p for p in (self.node, f"({self.op})" if self.op else "", self.where) if p)
        return f"{head}: {self.reason}"


class ModuleImportError(GraphError):
    """The module cannot be imported; ``unsupported`` lists every op at fault.

    The message leads with the root cause (the call and the class it is in that account for most of
    the ops), then lists each kind of op once: ``F.batch_norm x49 inside timm BatchNormAct2d``, with
    the first place it happens, instead of one line per occurrence.
    """

    def __init__(self, unsupported: list[Unsupported], header: str = "") -> None:
        self.unsupported = unsupported
        groups = group_unsupported(unsupported)
        if not header and groups:
            count, first = len(groups[0]), groups[0][0]
            inside = f" inside {first.owner}" if first.owner else ""
            header = f"{len(unsupported)} op(s) have no Torch Studio layer"
            if count > 1 or len(groups) > 1:
                header += f"; the root cause: {first.op or first.node}{inside} (x{count}): {first.reason}"
        lines = "\n".join(f"  {_group_line(g)}" for g in groups)
        super().__init__(f"{header}:\n{lines}" if unsupported else header)


def group_unsupported(unsupported: list[Unsupported]) -> list[list[Unsupported]]:
    """The ops grouped by what they call, the class they are in and why they fail (a parameter's name
    left out), the root cause first, then in order of first appearance."""
    groups: dict[tuple[str, str, str], list[Unsupported]] = {}
    for u in unsupported:
        key = (u.op, u.owner, re.sub(r"'[^']*'", "'…'", u.reason)) if u.op else (u.node, "", u.reason)
        groups.setdefault(key, []).append(u)
    ordered = list(groups.values())
    # The root cause is the first op that fails for itself: a parameter read fails only because the
    # call it feeds has no layer (timm's BatchNormAct2d traced into: F.batch_norm and its weights).
    root = next((g for g in ordered if g[0].op != "get_attr"), None)
    return [root, *(g for g in ordered if g is not root)] if root else ordered


def _group_line(group: list[Unsupported]) -> str:
    first = group[0]
    if len(group) == 1:
        return str(first)
    inside = f" inside {first.owner}" if first.owner else ""
    where = f"{first.node} {first.where}".strip()
    return f"{first.op} x{len(group)}{inside} (first: {where}): {first.reason}"


@dataclass
class ImportResult:
    """The imported graph and the module's weights keyed for the built graph."""

    graph: Graph
    state_dict: dict[str, torch.Tensor]


class _Tracer(fx.Tracer):
    """Stops at every module a rule covers, wherever its class comes from (a library's subclass of a
    torch layer, timm's BatchNormAct2d), so it imports whole; ``steps`` keeps what each becomes."""

    def __init__(self, leaves: frozenset[str] = frozenset()) -> None:
        super().__init__(autowrap_functions=library_functions())  # stochastic_depth, drop_path: kept whole
        self.record_stack_traces = False  # fx's full stack per node costs seconds on a big model: see create_node
        self.leaves = leaves  # module paths kept whole as Module nodes (see .opaque)
        self.steps: dict[str, list[Step]] = {}
        self.own = leaf_classes()

    def create_node(self, *args: Any, **kwargs: Any) -> fx.Node:
        node = super().create_node(*args, **kwargs)
        node.stack_trace = _user_frame()  # the one frame an error names, in the format fx writes
        return node

    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        if qualname in self.leaves or isinstance(m, self.own):
            return True
        if isinstance(m, nn.Sequential | nn.ModuleList | nn.ModuleDict):
            return False
        steps = module_steps(m)
        if steps is not None:
            self.steps[qualname] = steps
            return True
        return super().is_leaf_module(m, qualname)


def import_module(module: nn.Module, input_shape: tuple[int, ...] | list[int], num_classes: int | None = None,
                  *, name: str | None = None, strict: bool = False) -> ImportResult:
    """Trace ``module`` and turn it into a graph for a per-sample ``input_shape``.

    ``num_classes`` defaults to the size of the module's output. What does not map is kept as
    opaque Module nodes (the smallest enclosing submodule, see :mod:`.opaque`); with ``strict``, or
    where no submodule encloses it, raises :class:`ModuleImportError` listing every op that does not map.
    """
    shape = tuple(int(d) for d in input_shape)
    if not shape or min(shape) < 1:
        raise ModuleImportError([], f"input shape must be positive sizes, got {list(shape)}")
    leaves: frozenset[str] | None = frozenset()
    while True:  # each round keeps the smallest modules around unmapped ops whole (Module nodes)
        gm = _trace(module, leaves)
        dtype = "int64" if _feeds_embedding(gm) else "float32"
        values = _propagate(gm, shape, dtype)
        graph = Graph(InputSpec(shape, dtype), num_classes or 1, {
            "name": name or type(module).__name__, "description": f"Imported from {type(module).__name__}."})
        converter = _Converter(gm, values, graph, opaque=not strict)
        try:
            state = converter.run()
            break
        except ModuleImportError as exc:
            leaves = None if strict else widen(gm, exc.unsupported, leaves)
            if leaves is None:
                raise
    if num_classes is None:
        out = values[next(n for n in gm.graph.nodes if n.op == "output").args[0]]
        graph.num_classes = int(out.shape[-1]) if isinstance(out, torch.Tensor) and out.dim() == 2 else 1
    _check(graph, gm, values)
    graph.groups = _module_groups(module, converter.paths)
    for node_id, pos in nested_layout(graph).items():  # block by block, like the templates
        graph.nodes[node_id].position = pos
    return ImportResult(graph, state)


def _module_groups(module: nn.Module, paths: dict[str, str]) -> dict[str, Group]:
    """Groups by the module hierarchy: ``layer1.0.conv1`` goes in ``layer1`` > ``layer1.0`` (a
    BasicBlock); an op in a block's forward (its residual add) goes in that block."""
    kinds = {}
    for path in {p for p in paths.values() if p}:
        parts = path.split(".")
        for depth in range(1, len(parts) + 1):
            sub = ".".join(parts[:depth])
            try:
                kinds[sub] = type(module.get_submodule(sub)).__name__
            except AttributeError:
                continue
    return groups_from_paths(paths, kinds)


def guess_input_shape(module: nn.Module) -> tuple[int, ...] | None:
    """The per-sample input shape when the first layer fixes it (Linear: its in_features), else None."""
    try:
        gm = _trace(module)
    except ModuleImportError:
        return None
    users = _input_users(gm)
    if len(users) == 1 and users[0].op == "call_module":
        mod = gm.get_submodule(str(users[0].target))
        if isinstance(mod, nn.Linear):
            return (mod.in_features,)
    return None


def _input_users(gm: fx.GraphModule) -> list[fx.Node]:
    """The nodes that read the traced module's (first) input."""
    first = next((n for n in gm.graph.nodes if n.op == "placeholder"), None)
    return list(first.users) if first is not None else []


def _trace(module: nn.Module, leaves: frozenset[str] = frozenset()) -> fx.GraphModule:
    tracer = _Tracer(leaves)
    try:
        graph = tracer.trace(module, concrete_args=_bound_defaults(module))
    except Exception as exc:  # fx raises many kinds: control flow on tensors, unsupported Python...
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        if "control flow" in text:
            text = "its Python control flow depends on tensor values (an if or loop on a tensor), which torch.fx " \
                   "cannot follow symbolically"
        raise ModuleImportError([], f"torch.fx cannot trace {type(module).__name__}{_user_line(exc)}: "
                                    f"{type(exc).__name__}: {text}") from None
    gm = fx.GraphModule(tracer.root, graph, type(module).__name__)
    gm.meta["import_steps"] = tracer.steps
    _drop_unused(gm)
    for _, fold in FOLDS.items():  # a parameter read in forward and its op -> one module (x * self.gamma)
        fold(gm)
    return gm


def _bound_defaults(module: nn.Module) -> dict[str, Any] | None:
    """Forward's optional arguments bound to their defaults (timm's ``forward(x, attn_mask=None)``): a
    graph has one input, so only the first argument stays symbolic."""
    try:
        params = list(inspect.signature(module.forward).parameters.values())
    except (TypeError, ValueError):
        return None
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    bound = {p.name: p.default for p in params[1:] if p.kind in kinds and p.default is not inspect.Parameter.empty}
    return bound or None


def _user_line(exc: BaseException) -> str:
    """`` at file.py:12 `code` ``: the innermost frame of the traceback outside torch and this package."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not f.filename.startswith(_TORCH_DIR) and not f.filename.startswith(_HERE)]
    if not frames:
        return ""
    f = frames[-1]
    return f" at {os.path.basename(f.filename)}:{f.lineno} `{(f.line or '').strip()}`"


def _drop_unused(gm: fx.GraphModule) -> None:
    """Remove values nothing uses (``x, _ = attn(...)``'s second output, a parameter read for nothing, size
    arithmetic left over), so that they are neither converted nor reported."""
    def removable(n: fx.Node) -> bool:
        if n.op == "get_attr":
            return True
        return n.op == "call_function" and n.target in (operator.getitem, getattr) or (
            n.op == "call_method" and n.target in ("size", "dim"))

    for ph in [n for n in gm.graph.nodes if n.op == "placeholder" and n.args]:  # bound by _bound_defaults
        for user in list(ph.users):  # fx's checks that the bound value is the one given
            checks = [user, *user.users]
            if all(getattr(c.target, "__name__", "") in ("_assert_is_none", "eq", "_assert") for c in checks):
                for c in reversed(checks):
                    gm.graph.erase_node(c)
        if not ph.users:
            gm.graph.erase_node(ph)
    changed = True
    while changed:
        changed = False
        for n in reversed(list(gm.graph.nodes)):
            if not n.users and removable(n):
                gm.graph.erase_node(n)
                changed = True
    gm.recompile()


def _feeds_embedding(gm: fx.GraphModule) -> bool:
    """True when the input is category codes: it goes only into embeddings, one of them a plain
    ``nn.Embedding`` (the catalog's own Embedding also accepts float codes)."""
    users = [gm.get_submodule(str(u.target)) if u.op == "call_module" else None for u in _input_users(gm)]
    plain = [isinstance(m, nn.Embedding) for m in users]
    return any(plain) and all(p or isinstance(m, L.TabularEmbedding) for p, m in zip(plain, users, strict=True))


class _Recorder(nn.Module):
    """Runs the traced graph node by node and keeps every intermediate value (meta tensors)."""

    def __init__(self, gm: fx.GraphModule) -> None:
        super().__init__()
        self.gm = gm
        self.values: dict[fx.Node, Any] = {}

    def forward(self, x: torch.Tensor) -> Any:
        recorder = self

        class Interp(fx.Interpreter):
            def run_node(self, n: fx.Node) -> Any:
                out = _same_shape(self.module, n, recorder.values) if n.op == "call_module" else None
                out = super().run_node(n) if out is None else out
                recorder.values[n] = out
                if isinstance(out, torch.Tensor):
                    n.meta["val"] = out  # shapes for the import rules that need them (torch.split by size)
                return out

        return Interp(self.gm).run(x)


# Modules whose output is their input's shape and dtype: on meta, batch norm alone runs through
# Python decompositions at ~50 ms a call, most of a big network's import.
_SHAPE_KEEPING = (nn.modules.batchnorm._BatchNorm, nn.Identity, nn.Dropout, nn.Dropout2d, nn.ReLU, nn.ReLU6, nn.SiLU,
                  nn.GELU, nn.Hardswish, nn.Hardsigmoid, nn.Sigmoid, nn.Tanh)


def _same_shape(root: nn.Module, n: fx.Node, values: dict[fx.Node, Any]) -> torch.Tensor | None:
    """The output of a shape-keeping module call, without running it; None for any other call."""
    mod = root.get_submodule(str(n.target))
    base = next((c for c in _SHAPE_KEEPING if isinstance(mod, c)), None)
    if base is None or type(mod).forward is not base.forward or len(n.args) != 1 or n.kwargs:
        return None
    x = values.get(n.args[0]) if isinstance(n.args[0], fx.Node) else None
    return torch.empty_like(x) if isinstance(x, torch.Tensor) and x.is_meta else None


def _propagate(gm: fx.GraphModule, shape: tuple[int, ...], dtype: str) -> dict[fx.Node, Any]:
    """Every fx node's value on the meta device; the module's own tensors are never touched."""
    n_inputs = sum(1 for n in gm.graph.nodes if n.op == "placeholder")
    if n_inputs != 1:
        raise ModuleImportError([], f"the module's forward takes {n_inputs} inputs; a graph has exactly one")
    probe = _Recorder(gm)
    tensors = {k: v.to("meta") for k, v in [*probe.named_parameters(), *probe.named_buffers()]}
    if dtype == "int64":
        x = torch.zeros((_BATCH, *shape), dtype=torch.int64, device="meta")
    else:
        x = torch.empty((_BATCH, *shape), device="meta")
    try:
        functional_call(probe, tensors, (x,))
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModuleImportError([], f"the module fails on an input of shape {list(shape)}: {first}") from None
    return probe.values


class _Converter:
    """Walks the fx graph in order and adds one catalog node per mapped call."""

    def __init__(self, gm: fx.GraphModule, values: dict[fx.Node, Any], graph: Graph, opaque: bool = False) -> None:
        self.gm, self.values, self.graph = gm, values, graph
        self.opaque = opaque  # a module without a rule becomes a Module node
        self.ids: dict[fx.Node, str] = {}  # fx node -> the graph node holding its value
        self.ports: dict[fx.Node, str] = {}  # fx node -> the output port of ids[n] it is, where not "out"
        self.deferred: dict[fx.Node, tuple[Mapped, list[int] | None]] = {}  # permutes an unbind takes over
        self.part_permute: dict[fx.Node, list[int] | None] = {}  # unbind -> what each part is then permuted by
        self.parameters: dict[str, str] = {}  # parameter path -> its Parameter node
        self.failed: set[fx.Node] = set()
        self.problems: list[Unsupported] = []
        self.state: dict[str, torch.Tensor] = {}
        self.called: set[str] = set()
        self.paths: dict[str, str] = {}  # graph node -> the module path it is in, for groups

    def run(self) -> dict[str, torch.Tensor]:
        for n in self.gm.graph.nodes:
            try:
                self._visit(n)
            except _Skip:
                self.failed.add(n)  # an input is already reported; do not report its users too
            except Unmappable as exc:
                self.failed.add(n)
                self.problems.append(Unsupported(n.name, _describe(self.gm, n), _where(n), str(exc), _owner(n)))
        if self.problems:
            raise ModuleImportError(self.problems)
        return self.state

    def _visit(self, n: fx.Node) -> None:
        if n.op == "placeholder":
            self._add(n, Mapped("Input"), node_id="input")
        elif n.op == "get_attr":
            self._parameter(n)
        elif n.op == "output":
            (out,) = n.args
            if not isinstance(out, fx.Node) or not isinstance(self.values.get(out), torch.Tensor):
                raise Unmappable("the module returns more than one tensor; a graph has one output")
            self._add(n, Mapped("Output", {}, [out]), node_id="output")
        elif n.op == "call_module":
            self._module(n)
        elif self._passthrough(n) or self._helper(n):
            return
        else:
            self._add(n, self._function(n))

    def _module(self, n: fx.Node) -> None:
        target = str(n.target)
        mod = self.gm.get_submodule(target)
        steps = self.gm.meta.get("import_steps", {}).get(target) or module_steps(mod)
        if steps is None and self.opaque:  # the last resort: kept whole, an opaque Module node
            steps = [Step("", mod, lambda m, *args, **kw: module_node(m, n, self.values), True)]
        if steps is None:
            raise Unmappable("this module type has no catalog layer")
        first, *rest = steps
        if first.call:
            mapped = first.rule(mod, *n.args, **n.kwargs)
        else:
            if n.kwargs or not all(isinstance(a, fx.Node) for a in n.args):
                raise Unmappable("called with extra arguments (masks, flags); only module(x) maps")
            mapped = first.rule(mod, list(n.args))
        if target in self.called and mod.state_dict():  # weights or running statistics
            raise Unmappable(f"module '{target}' is called twice; a graph node cannot share its weights")
        self.called.add(target)
        node_id = self._add(n, mapped)
        if not node_id:
            return
        children = tuple(f"{s.child}." for s in rest)
        for k, v in mod.state_dict().items():
            if not k.startswith(children):
                self.state[f"{node_id}.{mapped.prefix}{k}"] = v.detach()
        for step in rest:  # a layer subclass whose forward goes on into its children (BatchNorm, then act)
            child = step.rule(step.module, [n])
            child_id = self._add(n, child, _safe_id(f"{node_id}_{step.child}", self.graph), sources=[node_id])
            for k, v in step.module.state_dict().items():
                self.state[f"{child_id}.{child.prefix}{k}"] = v.detach()
            node_id = child_id

    def _parameter(self, n: fx.Node) -> None:
        """A parameter read in forward (``self.cls_token``) becomes a Parameter node holding its value;
        every read of the same parameter is that one node."""
        target = str(n.target)
        if target in self.parameters:
            self.ids[n] = self.parameters[target]
            return
        try:
            value = self.gm.get_parameter(target)
        except AttributeError:
            value = None
        if value is None:
            raise Unmappable(f"reads the tensor attribute '{target}' directly (a buffer or constant); only "
                             "parameters, layers and ops on the input map to nodes")
        mapped, data = import_parameter(value)
        node_id = self._add(n, mapped, _safe_id(target.replace(".", "_"), self.graph))
        self.parameters[target] = node_id
        self.state[f"{node_id}.value"] = data

    def _function(self, n: fx.Node) -> Mapped:
        if n.target in ("unbind", torch.unbind) and n.args and n.args[0] in self.deferred:
            mapped, self.part_permute[n] = self.deferred[n.args[0]]
            return mapped
        if n.op == "call_method" and n.target in ("view", "reshape") or n.target is torch.reshape:
            return self._reshape(n)
        if n.target in ("permute", "transpose") or n.target in (torch.permute, torch.transpose):
            return self._permute(n)
        if n.target is operator.getitem and isinstance(self.values.get(n.args[0]), torch.Tensor):
            return self._select(n)
        rule = METHOD_RULES.get(str(n.target)) if n.op == "call_method" else FUNCTION_RULES.get(n.target)
        if rule is None:
            raise Unmappable("no catalog layer does this")
        try:
            return rule(*n.args, **n.kwargs)
        except TypeError as exc:
            raise Unmappable(f"unexpected arguments ({exc})") from None

    def _passthrough(self, n: fx.Node) -> bool:
        """Calls that change nothing the graph sees: ``x.contiguous()``, ``attn(x, x, x)[0]``."""
        src = n.args[0] if n.args else None
        if n.op == "call_method" and n.target == "contiguous":
            self.ids[n] = self._id_of(src)
            return True
        if n.target in (torch.cat, torch.concat, torch.concatenate) and isinstance(src, list | tuple) and len(
                src) == 1:  # torch.cat([x]) is x (DenseNet's first layer)
            self.ids[n] = self._id_of(src[0])
            return True
        if n.target is operator.getitem and isinstance(src, fx.Node) and src.op == "call_module" and isinstance(
                self.gm.get_submodule(str(src.target)), nn.MultiheadAttention):
            if n.args[1] != 0:
                raise Unmappable("uses the attention weights; only the attention output maps")
            self.ids[n] = self._id_of(src)
            return True
        if n.target is operator.getitem and isinstance(src, fx.Node) and isinstance(n.args[1], int):
            if src in self.failed:
                raise _Skip()  # reported where it failed
            holder = self.graph.nodes.get(self.ids.get(src, ""))
            spec = holder.spec if holder is not None else None
            if spec is not None and spec.multi_output:  # parts[i] of a Split: its output port i
                names = spec.outputs_for(holder.params)
                if not -len(names) <= n.args[1] < len(names):
                    raise Unmappable(f"reads part {n.args[1]} of {len(names)}")
                self.ids[n], self.ports[n] = holder.id, names[n.args[1]]
                if (dims := self.part_permute.get(src)) is not None:  # each part of a fused unbind
                    part = _safe_id(f"{holder.id}_{n.args[1]}", self.graph)
                    self._add(n, Mapped("Permute", {"dims": dims}, [n]), part)
                    del self.ports[n]  # n is now the Permute's output
                return True
        return n.target in ("permute", torch.permute) and self._unbind_follows(n)

    def _unbind_follows(self, n: fx.Node) -> bool:
        """A permute that moves the batch, read only by ``.unbind(0)`` (timm's attention): left to the
        unbind, which becomes an Unbind of the permute's input (see ops.split.unbind_after_permute)."""
        x, *rest = n.args
        dims = list(rest[0]) if len(rest) == 1 and isinstance(rest[0], list | tuple) else list(rest)
        dims = dims or list(n.kwargs.get("dims", ()))
        unbinds = [u for u in n.users if u.target in ("unbind", torch.unbind)]
        if not isinstance(x, fx.Node) or not dims or len(unbinds) != len(n.users) or any(
                (u.args[1] if len(u.args) > 1 else u.kwargs.get("dim", 0)) != 0 for u in unbinds):
            return False
        try:
            fused = unbind_after_permute(x, [int(d) % len(dims) for d in dims])
        except Unmappable:
            return False
        if fused is None:
            return False
        self.deferred[n] = fused
        return True

    def _helper(self, n: fx.Node) -> bool:
        """Size arithmetic (``x.size(0)``, ``x.shape[1] * 2``): no tensor, so no node. A reshape may
        use its result; any other use is reported where it happens."""
        return n.op in ("call_function", "call_method") and not _holds_tensor(self.values.get(n))

    def _reshape(self, n: fx.Node) -> Mapped:
        x, *dims = n.args if n.args else (n.kwargs.get("input"), n.kwargs.get("shape"))
        if len(dims) == 1 and isinstance(dims[0], list | tuple):
            dims = list(dims[0])
        out, inp = self.values[n].shape, self.values[x].shape
        if not dims or out[0] != inp[0] or not (isinstance(dims[0], fx.Node) or dims[0] == -1):
            raise Unmappable("reshapes across the batch dimension; only per-sample reshapes map")
        if len(out) == 2 and len(inp) > 2:
            return Mapped("Flatten", {"start_dim": 1, "end_dim": -1}, [x])
        return Mapped("Reshape", {"shape": [int(d) for d in out[1:]]}, [x])

    def _permute(self, n: fx.Node) -> Mapped:
        x, *rest = n.args
        rank = self.values[x].dim()
        if n.target in ("transpose", torch.transpose):
            a, b = (int(d) % rank for d in [*rest, *n.kwargs.values()][:2])
            dims = list(range(rank))
            dims[a], dims[b] = dims[b], dims[a]
        else:
            dims = list(rest[0]) if len(rest) == 1 and isinstance(rest[0], list | tuple) else list(rest)
            dims = dims or list(n.kwargs.get("dims", ()))
        mapped = permute_dims([int(d) for d in dims], rank)
        mapped.inputs = [x]
        return mapped

    def _select(self, n: fx.Node) -> Mapped:
        x, index = n.args
        if (self.values[x].dim() == 3 and isinstance(index, tuple) and len(index) == 2
                and index[0] == slice(None) and isinstance(index[1], int)):
            return Mapped("SelectToken", {"index": index[1]}, [x])
        rule = FUNCTION_RULES.get(operator.getitem)  # slicing one dim, x[:, a:b]: Slice (ops.reshape)
        if rule is None:
            raise Unmappable(f"indexing x[{index!r}]; only selecting one token of a sequence, x[:, i], maps")
        return rule(x, index)

    def _id_of(self, src: Any) -> str:
        if src in self.failed:
            raise _Skip()
        if src not in self.ids:
            raise Unmappable("computes with tensor sizes or a value that is not a layer output")
        return self.ids[src]

    def _add(self, n: fx.Node, mapped: Mapped, node_id: str | None = None, sources: list[str] | None = None) -> str:
        try:
            ports = ["out"] * len(sources) if sources is not None else [self.ports.get(x, "out") for x in mapped.inputs]
            sources = sources if sources is not None else [self._id_of(x) for x in mapped.inputs]
        except _Skip:
            self.failed.add(n)  # an input is already reported; do not report its users too
            return ""
        node_id = node_id or _safe_id(_readable_id(n), self.graph)
        try:
            self.graph.add_node(mapped.type, node_id, mapped.params)
        except GraphError as exc:  # e.g. LeakyReLU(-0.1): a value the catalog does not allow
            raise Unmappable(f"{mapped.type} cannot take it: {exc.message}") from None
        inputs = self.graph.nodes[node_id].spec.inputs
        wired: list[tuple[str, str, str]] = []
        for i, (src, src_port) in enumerate(zip(sources, ports, strict=True)):
            # A variadic first port takes every input; otherwise input i goes to port i (q, k, v).
            port = inputs[0].name if inputs[0].variadic or i >= len(inputs) else inputs[i].name
            if (src, src_port, port) in wired:  # x + x: a graph has one wire per pair of ports, so pass a copy
                copy = _safe_id(f"{src}_copy", self.graph)
                self.graph.add_node("Identity", copy)
                self.graph.connect(src, copy, src_port=src_port)
                src, src_port = copy, "out"
            wired.append((src, src_port, port))
            # In fx order no wire can close a cycle, and validation checks every port: connect's
            # per-wire checks scan all edges, quadratic over a 500-node network
            self.graph.add_edge(Edge(src, node_id, src_port, port), check=False)
        self.ids[n] = node_id
        self.paths[node_id] = _module_path(n)
        return node_id


def _holds_tensor(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return True
    return isinstance(value, list | tuple) and any(_holds_tensor(v) for v in value)


class _Skip(Unmappable):
    """An input of this node failed; the failure is reported once, where it happened."""


def _module_path(n: fx.Node) -> str:
    """The module a node's value is computed in: a module call's parent, an op's enclosing module."""
    if n.op == "call_module":
        return str(n.target).rpartition(".")[0]
    if n.op in ("call_function", "call_method"):
        stack = n.meta.get("nn_module_stack") or {}
        return next(reversed(stack.values()))[0] if stack else ""
    return ""


def _readable_id(n: fx.Node) -> str:
    """Module calls keep fx's name (the module path, ``layer1_0_conv1``); an op inside a submodule's
    forward is named after that module too (``layer1_0_add``, not fx's global ``add_3``)."""
    stack = n.meta.get("nn_module_stack") or {}
    if n.op in ("call_function", "call_method") and stack:
        path = next(reversed(stack.values()))[0]
        return f"{path.replace('.', '_')}_{re.sub(r'_[0-9]+$', '', n.name)}"
    return n.name


def _safe_id(name: str, graph: Graph) -> str:
    """``name`` as a valid, unused node id that no nn.Module attribute shadows."""
    base = re.sub(r"\W", "_", name)
    if not base or base[0].isdigit() or base in _RESERVED:
        base = f"_{base}" if base and base[0].isdigit() else f"{base}_"
    node_id, i = base, 2
    while node_id in graph.nodes:
        node_id, i = f"{base}_{i}", i + 1
    return node_id


def _check(graph: Graph, gm: fx.GraphModule, values: dict[fx.Node, Any]) -> None:
    """The catalog must agree with PyTorch on every shape, or the import would be wrong."""
    inf = validate(graph, batch=_BATCH)
    problems = [Unsupported(p.node or "graph", "", "", p.message) for p in inf.problems if p.severity == "error"]
    by_id = {n.name: n for n in gm.graph.nodes}
    for node_id, shape in inf.shapes.items():
        n = by_id.get(node_id)
        value = values.get(n) if n is not None else None
        if n is not None and n.op == "get_attr":
            continue  # a Parameter node holds the value read: [D] as [1, D], which broadcasts alike
        if isinstance(value, torch.Tensor) and tuple(value.shape) != shape:
            problems.append(Unsupported(node_id, graph.nodes[node_id].type, "", f"PyTorch gives shape "
                                        f"{list(value.shape)}, the catalog infers {list(shape)}"))
    if problems:
        raise ModuleImportError(problems, "the imported graph does not validate")


def _describe(gm: fx.GraphModule, n: fx.Node) -> str:
    if n.op == "call_module":
        cls = type(gm.get_submodule(str(n.target)))
        return re.sub(r"^torch\.nn\.modules\.\w+\.", "nn.", f"{cls.__module__}.{cls.__qualname__}")
    if n.op == "call_method":
        return f"Tensor.{n.target}"
    if n.op == "call_function":
        t = n.target
        mod = getattr(t, "__module__", None) or "torch"
        mod = {"_operator": "operator", "torch._C._VariableFunctions": "torch", "torch._C._nn": "F",
               "torch.nn.functional": "F"}.get(mod, mod)
        return f"{mod}.{getattr(t, '__name__', t)}"
    return n.op


def _owner(n: fx.Node) -> str:
    """The class whose ``forward`` made ``n`` (its own class for a module call), as
    ``timm BatchNormAct2d``, ``torchvision EncoderBlock`` or ``nn.LSTM``; empty at the top level."""
    stack = list((n.meta.get("nn_module_stack") or {}).values())
    cls = stack[-1][1] if stack else None
    if not isinstance(cls, type):
        return str(cls or "")
    package = cls.__module__.split(".")[0]
    return f"nn.{cls.__qualname__}" if package == "torch" else f"{package} {cls.__qualname__}"


def _user_frame() -> str:
    """The innermost caller outside torch and this package, as fx formats a stack trace frame."""
    f = sys._getframe(2)
    while f is not None and (f.f_code.co_filename.startswith(_TORCH_DIR) or f.f_code.co_filename.startswith(_HERE)):
        f = f.f_back
    if f is None:
        return ""
    code = linecache.getline(f.f_code.co_filename, f.f_lineno).strip()
    return f'File "{f.f_code.co_filename}", line {f.f_lineno}, in {f.f_code.co_name}\n    {code}'


def _where(n: fx.Node) -> str:
    stack = n.meta.get("nn_module_stack") or {}
    path = next(reversed(stack.values()))[0] if stack else ""
    if n.op == "call_module":
        path = str(n.target)
    frames = re.findall(r'File "([^"]+)", line (\d+), in [^\n]*\n\s*(.*)', n.stack_trace or "")
    user = [f for f in frames if not f[0].startswith(_TORCH_DIR) and not f[0].startswith(_HERE)]
    parts = []
    if path:
        parts.append(f"in {path}")
    if user:
        file, line, code = user[-1]
        parts.append(f"at {os.path.basename(file)}:{line} `{code.strip()}`")
    return " ".join(parts) or "in forward"
