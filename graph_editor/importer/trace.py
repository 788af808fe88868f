"""Tracing for the importer: ``torch.fx`` with the catalog's leaves, then one run on ``meta``.

:func:`trace` stops at every module a rule covers (and at the modules kept whole as Module nodes),
binds optional forward arguments, drops values nothing uses and folds parameter reads into their ops.
:func:`propagate` runs the traced graph once on the ``meta`` device and keeps every node's value, so
the conversion knows each tensor's shape without touching the module's weights.
"""

from __future__ import annotations

import inspect
import operator
from typing import Any

import torch
from torch import fx, nn
from torch.func import functional_call

from ..building import layers as L
from ..building.data_dependent import data_dependent_cause, describe
from .attention_forms import einsum_as_matmul, unbind_before_reshape, whole_writes
from .computed import fold_computed
from .constants import fold_constants
from .errors import ModuleImportError, user_frame, user_line, where
from .rules import FOLDS, Step, leaf_classes, library_functions, module_steps

BATCH = 2  # example batch for shape propagation; 2 so that BatchNorm in training mode accepts it


class _Tracer(fx.Tracer):
    """Stops at every module a rule covers, wherever its class comes from (a library's subclass of a
    torch layer, timm's BatchNormAct2d), so it imports whole; ``steps`` keeps what each becomes."""

    def __init__(self, leaves: frozenset[str] = frozenset()) -> None:
        super().__init__(autowrap_functions=library_functions())  # stochastic_depth, drop_path: kept whole
        self.record_stack_traces = False  # fx's full stack per node costs seconds on a big model: see create_node
        self.leaves = leaves  # module paths kept whole as Program nodes (see .opaque)
        self.steps: dict[str, list[Step]] = {}
        self.own = leaf_classes()

    def create_node(self, *args: Any, **kwargs: Any) -> fx.Node:
        node = super().create_node(*args, **kwargs)
        node.stack_trace = user_frame()  # the one frame an error names, in the format fx writes
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


def input_users(gm: fx.GraphModule) -> list[fx.Node]:
    """The nodes that read the traced module's (first) input."""
    first = next((n for n in gm.graph.nodes if n.op == "placeholder"), None)
    return list(first.users) if first is not None else []


def trace(module: nn.Module, leaves: frozenset[str] = frozenset()) -> fx.GraphModule:
    tracer = _Tracer(leaves)
    try:
        graph = tracer.trace(module, concrete_args=_bound_defaults(module))
    except Exception as exc:  # fx raises many kinds: control flow on tensors, unsupported Python...
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        if "control flow" in text:
            text = "its Python control flow depends on tensor values (an if or loop on a tensor), which torch.fx " \
                   "cannot follow symbolically"
        raise ModuleImportError([], f"torch.fx cannot trace {type(module).__name__}{user_line(exc)}: "
                                    f"{type(exc).__name__}: {text}") from None
    return prepare(fx.GraphModule(tracer.root, graph, type(module).__name__), tracer.steps)


def prepare(gm: fx.GraphModule, steps: dict[str, list[Step]] | None = None) -> fx.GraphModule:
    """``gm`` ready to convert: values nothing uses dropped, parameter reads folded into their ops."""
    gm.meta["import_steps"] = steps or {}
    _drop_unused(gm)
    unbind_before_reshape(gm)  # SAM's qkv.reshape(3, B * heads, N, -1).unbind(0): the parts, each reshaped
    einsum_as_matmul(gm)  # the decomposed relative-position bias's einsums (SAM, MViTv2): a @ b.transpose
    whole_writes(gm)  # MViTv2's attn[:, :, 0:, 0:] = attn + bias: the readers after it read the value written
    _max_values(gm)  # VOLO's aux.max(1)[0]: the maximum's values alone, an amax
    fold_constants(gm)  # torch.arange of a size, a mask from a buffer: computed now, a Constant node each
    for _, fold in FOLDS.items():  # a parameter read in forward and its op -> one module (x * self.gamma)
        fold(gm)
    fold_computed(gm)  # what only learned tensors reach (a clamped scale, a joined qkv bias): a Computed node each
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


def _max_values(gm: fx.GraphModule) -> None:
    """``x.max(d)[0]`` (``torch.max(x, d)``, ``aten.max.dim``), whose indices nothing reads, as ``x.amax(d)``."""
    for n in list(gm.graph.nodes):
        is_max = n.op == "call_method" and n.target == "max" or n.target in (torch.max, torch.ops.aten.max.dim)
        if not is_max or len(n.args) + len(n.kwargs) < 2 or not n.users or any(
                u.target is not operator.getitem or u.args[1] != 0 for u in n.users):
            continue
        args: list[Any] = [*n.args, *n.kwargs.values()]
        x, dim, rest = args[0], args[1], args[2:]
        if not isinstance(dim, int) or rest and not isinstance(rest[0], bool):
            continue
        with gm.graph.inserting_before(n):
            amax = gm.graph.call_function(torch.amax, (x, dim, bool(rest and rest[0])))
        amax.meta = {k: v for k, v in n.meta.items() if k != "val"}
        for u in list(n.users):
            u.replace_all_uses_with(amax)
            gm.graph.erase_node(u)
        gm.graph.erase_node(n)


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


def feeds_embedding(gm: fx.GraphModule) -> bool:
    """True when the input is category codes: it goes only into embeddings, one of them a plain
    ``nn.Embedding`` (the catalog's own Embedding also accepts float codes)."""
    users = [gm.get_submodule(str(u.target)) if u.op == "call_module" else None for u in input_users(gm)]
    plain = [isinstance(m, nn.Embedding) for m in users]
    return any(plain) and all(p or isinstance(m, L.TabularEmbedding) for p, m in zip(plain, users, strict=True))


class _Recorder(nn.Module):
    """Runs the traced graph node by node and keeps every intermediate value (meta tensors)."""

    def __init__(self, gm: fx.GraphModule) -> None:
        super().__init__()
        self.gm = gm
        self.values: dict[fx.Node, Any] = {}
        self.running: fx.Node | None = None  # the node whose run raised, when one did

    def forward(self, x: torch.Tensor) -> Any:
        recorder = self

        class Interp(fx.Interpreter):
            def run_node(self, n: fx.Node) -> Any:
                recorder.running = n
                out = _same_shape(self.module, n, recorder.values) if n.op == "call_module" else None
                out = super().run_node(n) if out is None else out
                recorder.values[n] = out
                if isinstance(out, torch.Tensor):
                    n.meta["val"] = out  # shapes for the import rules that need them (torch.split by size)
                elif isinstance(out, int) and not isinstance(out, bool):
                    n.meta["static"] = out  # a size computed from shapes (F.interpolate(x, size=y.shape[-2:]))
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


def propagate(gm: fx.GraphModule, shape: tuple[int, ...], dtype: str) -> dict[fx.Node, Any]:
    """Every fx node's value on the meta device; the module's own tensors are never touched. A
    module that needs its data's values (``.item()``) runs once on a small real batch instead."""
    n_inputs = sum(1 for n in gm.graph.nodes if n.op == "placeholder")
    if n_inputs != 1:
        raise ModuleImportError([], f"the module's forward takes {n_inputs} inputs; a graph has exactly one")
    probe = _Recorder(gm)
    tensors = {k: v.to("meta") for k, v in [*probe.named_parameters(), *probe.named_buffers()]}
    if dtype == "int64":
        x = torch.zeros((BATCH, *shape), dtype=torch.int64, device="meta")
    else:
        x = torch.empty((BATCH, *shape), device="meta")
    try:
        functional_call(probe, tensors, (x,))
    except Exception as exc:
        if data_dependent_cause(exc) is None:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ModuleImportError([], f"the module fails on an input of shape {list(shape)}: {first}") from None
        return _propagate_real(gm, shape, dtype, exc, probe.running)
    return probe.values


def _propagate_real(gm: fx.GraphModule, shape: tuple[int, ...], dtype: str, meta_exc: Exception,
                    running: fx.Node | None) -> dict[fx.Node, Any]:
    """The values on a small real batch, for a module that reads its data's values (``.item()``, a
    boolean mask) where meta tensors have none. Runs on copies of the module's weights, so running
    statistics are left as they were; weights that are themselves on ``meta`` cannot run."""
    probe = _Recorder(gm)
    owned = [*probe.named_parameters(), *probe.named_buffers()]
    if any(v.is_meta for _, v in owned):
        raise ModuleImportError([], _value_read(gm, running, meta_exc, "its shapes need a run on real weights, "
                                                "and these are on the meta device")) from None
    tensors = {k: v.detach().clone() for k, v in owned}
    if dtype == "int64":
        x = torch.zeros((BATCH, *shape), dtype=torch.int64)
    else:
        x = torch.rand((BATCH, *shape), generator=torch.Generator().manual_seed(0))
    try:
        with torch.no_grad():
            functional_call(probe, tensors, (x,))
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModuleImportError([], _value_read(gm, running, meta_exc, f"and a real run of shape {list(shape)} "
                                                f"failed too: {first}")) from None
    return probe.values


def _value_read(gm: fx.GraphModule, n: fx.Node | None, exc: Exception, consequence: str) -> str:
    """'module scale (ItemScale) calls .item() at mod.py:40 `...`: a value that depends on the data, ...'
    for the traced call ``n`` that raised ``exc`` on meta."""
    if n is not None and n.op == "call_module":
        label = f"module {n.target} ({type(gm.get_submodule(str(n.target))).__name__})"
    elif n is not None and (stack := list((n.meta.get("nn_module_stack") or {}).values())):
        path, cls = stack[-1]
        label = f"module {path} ({getattr(cls, '__name__', cls)})"
    else:
        label = f"the module ({type(gm).__name__})"
    message = describe(exc, label, consequence) or f"{label}: {exc}; {consequence}"
    if n is not None and " at " not in message.split(":")[0]:
        line = where(n).partition(" at ")[2]  # the traceback ran in fx's code; the traced frame has the line
        if line:
            message = message.replace(f"{label} {data_dependent_cause(exc)}", f"{label} {data_dependent_cause(exc)} "
                                      f"at {line}", 1)
    return message
