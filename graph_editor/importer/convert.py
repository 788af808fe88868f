"""The importer's conversion: each traced fx node becomes a catalog node by the rules of :mod:`.import_rules`.

:class:`Converter` walks the fx graph in order with every node's ``meta`` value at hand; a module
without a rule becomes a Program node when allowed; what does not map is collected as
:class:`~.import_errors.Unsupported` and raised together in one :class:`~.import_errors.ModuleImportError`.
"""

from __future__ import annotations

import operator
import re
from typing import Any

import torch
from torch import fx, nn

from ..building.ops.param import batch_source, import_constant, import_parameter
from ..building.ops.split import unbind_after_permute
from ..model import Edge, Graph, GraphError
from .capture import program_call
from .errors import ModuleImportError, Unsupported, describe, owner, where
from .rules import FUNCTION_RULES, METHOD_RULES, Mapped, Step, Unmappable, module_steps, permute_dims
from .trace import BATCH

_RESERVED = frozenset(dir(nn.Module()))
# Causes no spelling of the op changes (the exported program's ATen ops fail on them alike)
ACROSS_BATCH = "reshapes across the batch dimension"
SHARED = "a graph node cannot share its weights"
INVARIANT = (ACROSS_BATCH, SHARED)  # ids that would clash with nn.Module attributes when built


class Converter:
    """Walks the fx graph in order and adds one catalog node per mapped call."""

    def __init__(self, gm: fx.GraphModule, values: dict[fx.Node, Any], graph: Graph, opaque: bool = False) -> None:
        self.gm, self.values, self.graph = gm, values, graph
        self.opaque = opaque  # a module without a rule becomes a Program node
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
                self.problems.append(Unsupported(n.name, describe(self.gm, n), where(n), str(exc), owner(n)))
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
            if isinstance(out, tuple | list) and out and isinstance(out[0], fx.Node):
                out = out[0]  # (logits, aux_logits): the graph's output is the first; the others stay unread
            if not isinstance(out, fx.Node) or not isinstance(self.values.get(out), torch.Tensor):
                raise Unmappable("the module returns no tensor first; a graph's output is one tensor")
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
        if steps is None and self.opaque:  # kept whole as its own exported program
            steps = [Step("", mod, lambda m, *args, **kw: program_call(m, n, self.values, target), True)]
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
            raise Unmappable(f"module '{target}' is called twice; {SHARED}")
        self.called.add(target)
        node_id = self._add(n, mapped)
        if not node_id:
            return
        if mapped.state is not None:  # a Program node: the weights its program holds
            self.state.update({f"{node_id}.{k}": v for k, v in mapped.state.items()})
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
        """A tensor read in forward becomes a node holding its value: a parameter (``self.cls_token``) a
        Parameter node, a buffer or a value the importer computed from sizes a Constant node; every read of the
        same tensor is that one node."""
        target = str(n.target)
        if target in self.parameters:
            self.ids[n] = self.parameters[target]
            return
        value = _tensor_at(self.gm, target)
        if value is None:
            raise Unmappable(f"reads the attribute '{target}' directly, which is not a tensor; only tensors, layers "
                             "and ops on the input map to nodes")
        if isinstance(value, nn.Parameter):
            mapped, data = import_parameter(value)
            node_id = self._add(n, mapped, _safe_id(target.replace(".", "_"), self.graph))
            self.state[f"{node_id}.value"] = data
        else:  # its values are the node's own params, not weights
            node_id = self._add(n, import_constant(value), _safe_id(target.replace(".", "_"), self.graph))
        self.parameters[target] = node_id

    def _function(self, n: fx.Node) -> Mapped:
        if n.target in ("unbind", torch.unbind) and _args(n) and _args(n)[0] in self.deferred:
            mapped, self.part_permute[n] = self.deferred[_args(n)[0]]
            return mapped
        if n.op == "call_method" and n.target in ("view", "reshape") or n.target is torch.reshape:
            return self._reshape(n)
        if n.target in ("permute", "transpose") or n.target in (torch.permute, torch.transpose):
            return self._permute(n)
        if n.target is operator.getitem and isinstance(self.values.get(_args(n)[0]), torch.Tensor):
            return self._select(n)
        rule = METHOD_RULES.get(str(n.target)) if n.op == "call_method" else FUNCTION_RULES.get(n.target)
        if rule is None:
            raise Unmappable("no catalog layer does this")
        try:
            return rule(*_args(n), **n.kwargs)
        except TypeError as exc:
            raise Unmappable(f"unexpected arguments ({exc})") from None

    def _passthrough(self, n: fx.Node) -> bool:
        """Calls that change nothing the graph sees: ``x.contiguous()``, ``attn(x, x, x)[0]``."""
        src = _args(n)[0] if _args(n) else None
        if n.op == "call_method" and n.target == "contiguous":
            self.ids[n] = self._id_of(src)
            return True
        if n.target in (torch.cat, torch.concat, torch.concatenate) and isinstance(src, list | tuple) and len(
                src) == 1:  # torch.cat([x]) is x (DenseNet's first layer)
            self.ids[n] = self._id_of(src[0])
            return True
        if n.target is operator.getitem and isinstance(src, fx.Node) and src.op == "call_module" and isinstance(
                self.gm.get_submodule(str(src.target)), nn.MultiheadAttention | nn.LSTM | nn.GRU):
            if _args(n)[1] != 0:  # (output, weights) of attention, (output, final state) of an LSTM or GRU
                raise Unmappable("uses the attention weights or a recurrent layer's final state; only the output "
                                 "maps")
            self.ids[n] = self._id_of(src)
            return True
        if n.target is operator.getitem and isinstance(src, fx.Node) and isinstance(_args(n)[1], int):
            if src in self.failed:
                raise _Skip()  # reported where it failed
            if src in self.deferred and src not in self.ids:  # q, k, v = qkv[0], qkv[1], qkv[2] of a permute
                mapped, self.part_permute[src] = self.deferred[src]
                self._add(src, mapped, _safe_id(f"{_readable_id(src)}_unbind", self.graph))  # not the permute's value
            holder = self.graph.nodes.get(self.ids.get(src, ""))
            spec = holder.spec if holder is not None else None
            if holder is not None and spec is not None and spec.multi_output:  # parts[i] of a Split: port i
                names = spec.outputs_for(holder.params)
                if not -len(names) <= _args(n)[1] < len(names):
                    raise Unmappable(f"reads part {_args(n)[1]} of {len(names)}")
                self.ids[n], self.ports[n] = holder.id, names[_args(n)[1]]
                if (dims := self.part_permute.get(src)) is not None:  # each part of a fused unbind
                    part = _safe_id(f"{holder.id}_{_args(n)[1]}", self.graph)
                    self._add(n, Mapped("Permute", {"dims": dims}, [n]), part)
                    del self.ports[n]  # n is now the Permute's output
                return True
        return n.target in ("permute", torch.permute) and self._unbind_follows(n)

    def _unbind_follows(self, n: fx.Node) -> bool:
        """A permute that moves the batch, read only by ``.unbind(0)`` (timm's attention) or by picking its
        parts, ``qkv[0], qkv[1], qkv[2]`` (CaiT's): left to the unbind or the first pick, which becomes an
        Unbind of the permute's input (see ops.split.unbind_after_permute)."""
        x, *rest = _args(n)
        dims = list(rest[0]) if len(rest) == 1 and isinstance(rest[0], list | tuple) else list(rest)
        dims = dims or list(_kwargs(n).get("dims", ()))
        unbinds = [u for u in n.users if u.target in ("unbind", torch.unbind)]
        picks = [u for u in n.users if u.target is operator.getitem and isinstance(u.args[1], int)]
        if not isinstance(x, fx.Node) or not dims or len(unbinds) != len(n.users) and len(picks) != len(n.users) or any(
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
        x, *dims = _args(n) if _args(n) else (_kwargs(n).get("input"), _kwargs(n).get("shape"))
        if len(dims) == 1 and isinstance(dims[0], list | tuple):
            dims = list(dims[0])
        out, inp = self.values[n].shape, self.values[x].shape
        if dims and out[0] != inp[0]:
            return self._fold(x, dims, out, inp)
        if not dims or not (isinstance(dims[0], fx.Node) or dims[0] == -1):
            raise Unmappable(f"{ACROSS_BATCH}; only per-sample reshapes map")
        if len(out) == 2 and len(inp) > 2:
            return Mapped("Flatten", {"start_dim": 1, "end_dim": -1}, [x])
        return Mapped("Reshape", {"shape": [int(d) for d in out[1:]]}, [x])

    def _fold(self, x: fx.Node, dims: list[Any], out: Any, inp: Any) -> Mapped:
        """A reshape that folds rows into the batch dimension or out of it (``x.view(-1, ws * ws, C)``, Swin's
        windows; ``attn.view(B_ // nW, nW, ...)``): a Reshape with ``fold_batch`` where each sample's values
        stay together at any batch -- the leading size is -1 or computed from the batch, every other size
        is not, and both leading sizes are whole multiples of the batch."""
        lead, rest = dims[0], dims[1:]
        from_batch = lead == -1 or isinstance(lead, fx.Node) and self._from_batch(lead)
        if (not from_batch or out[0] % BATCH or inp[0] % BATCH or any(self._from_batch(d) for d in rest)
                or lead == -1 and -1 in rest):
            raise Unmappable(f"{ACROSS_BATCH}; only per-sample reshapes, or ones that fold whole samples into "
                             "the batch dimension (a leading -1 or size computed from the batch), map")
        return Mapped("Reshape", {"shape": [int(d) for d in out[1:]], "fold_batch": True}, [x])

    def _from_batch(self, size: Any) -> bool:
        """Whether a traced size is computed from a batch size (``B * nW`` of ``B, H, W, C = x.shape``)."""
        stack, seen = [size], set()
        while stack:
            node = stack.pop()
            if not isinstance(node, fx.Node) or node in seen or isinstance(self.values.get(node), torch.Tensor):
                continue
            seen.add(node)
            if batch_source(node) is not None:
                return True
            stack.extend(node.all_input_nodes)
        return False

    def _permute(self, n: fx.Node) -> Mapped:
        x, *rest = _args(n)
        rank = self.values[x].dim()
        if n.target in ("transpose", torch.transpose):
            a, b = (int(d) % rank for d in [*rest, *_kwargs(n).values()][:2])
            dims = list(range(rank))
            dims[a], dims[b] = dims[b], dims[a]
        else:
            dims = list(rest[0]) if len(rest) == 1 and isinstance(rest[0], list | tuple) else list(rest)
            dims = dims or list(_kwargs(n).get("dims", ()))
        mapped = permute_dims([int(d) for d in dims], rank)
        mapped.inputs = [x]
        return mapped

    def _select(self, n: fx.Node) -> Mapped:
        x, index = _args(n)
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
        spec = self.graph.nodes[node_id].spec
        if spec is None:  # add_node refuses a type the catalog lacks; a rule names catalog types only
            raise Unmappable(f"{mapped.type} is not a catalog layer")
        inputs = spec.inputs
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


def _args(n: fx.Node) -> tuple[Any, ...]:
    """A call's positional arguments, as the rules read them (fx types them as any Argument)."""
    return tuple(n.args)


def _kwargs(n: fx.Node) -> dict[str, Any]:
    return dict(n.kwargs)


def _tensor_at(root: nn.Module, path: str) -> torch.Tensor | None:
    obj: Any = root
    for part in path.split("."):
        obj = getattr(obj, part, None)
    return obj if isinstance(obj, torch.Tensor) else None


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
    path = next(reversed(stack.values()))[0] if stack else ""
    if n.op in ("call_function", "call_method") and path:  # (torch.export's root module has the path "")
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
