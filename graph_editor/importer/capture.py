"""Capture with ``torch.export``: what the catalog cannot express becomes a Program node.

:func:`capture` exports a module (non-strict first, as people's code runs; strict where non-strict
fixes the batch size, since ``len(x)`` is a plain int outside dynamo) with the batch dimension of
every tensor input dynamic, at the example shapes the importer's ``meta`` run recorded: Python that
depends on other sizes (``int(x.size(1) * r)``, ``if h != w``) specialises at those shapes.
:func:`program_call` turns one call of an unmapped submodule into a Program node, whatever it takes
and returns (tensors in any number; other arguments are captured as constants); :func:`whole_program`
is the last resort, the whole model as one Program node. No constructor is guessed: the node holds
the module's own program and weights.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from typing import Any

import torch
from torch import fx, nn
from torch.export import Dim, ExportedProgram
from torch.export.graph_signature import OutputKind

from ..building.ops.program import TYPE, ProgramError, encode
from ..model import Graph, InputSpec
from .errors import user_line
from .rules import Mapped, Unmappable
from .trace import BATCH

EXAMPLE_BATCH = 2


@contextlib.contextmanager
def without_cuda() -> Iterator[None]:
    """``.cuda()`` (a module's or a tensor's) is a no-op while this runs on a machine without CUDA, so
    that a factory or a forward written for a GPU (``model.cuda()``) imports on the CPU."""
    if torch.cuda.is_available():
        yield
        return
    saved = nn.Module.cuda, torch.Tensor.cuda
    nn.Module.cuda = lambda self, *a, **k: self  # type: ignore[method-assign]
    torch.Tensor.cuda = lambda self, *a, **k: self  # type: ignore[method-assign]
    try:
        yield
    finally:
        nn.Module.cuda, torch.Tensor.cuda = saved  # type: ignore[method-assign]


class _Bound(nn.Module):
    """``module(*args, **kwargs)`` with the tensor arguments as this module's inputs, in order, and every
    other argument fixed (a mask of None, a flag): what the program captures."""

    def __init__(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        super().__init__()
        self.inner = module
        self.args, self.kwargs = args, kwargs

    def forward(self, *xs: torch.Tensor) -> Any:
        it = iter(xs)
        fill = lambda a: next(it) if a is _TENSOR else a  # noqa: E731
        return self.inner(*[fill(a) for a in self.args], **{k: fill(v) for k, v in self.kwargs.items()})


_TENSOR = object()  # where a tensor input goes in a bound call
FIXED_BATCH = "(its program fixes the batch size at "


def capture(module: nn.Module, xs: list[torch.Tensor], what: str) -> ExportedProgram:
    """``module(*xs)`` as an ExportedProgram with a dynamic batch; Unmappable saying why it cannot be."""
    dims: tuple[Any, ...] = tuple({0: Dim.AUTO} for _ in xs)
    if isinstance(module, _Bound):
        dims = (dims,)  # forward(*xs): one argument, the tuple
    failures: list[str] = []   # as Python runs it (non-strict), then under dynamo (strict)
    modes = [(m, m.training) for m in module.modules()]  # each its own: a user's block may be in train mode
    module.eval()
    try:
        for strict in (False, True):
            try:
                with without_cuda(), _quiet():
                    ep = torch.export.export(module, tuple(xs), dynamic_shapes=dims, strict=strict)
            except Exception as exc:  # export raises many kinds: data-dependent control flow, unsupported Python
                failures.append(_why(exc))
                continue
            fixed = _fixed_batch(ep)
            if fixed is None:
                return ep
            failures.append(f"{FIXED_BATCH}{fixed})")
    finally:
        for m, training in modes:
            m.training = training
    # Dynamo is tried for a program that fixed the batch size (len(x) is a plain int outside it): what it
    # said then is the reason too; after any other failure its own is the same one again, at length.
    said, under_dynamo = failures
    if said.startswith(FIXED_BATCH):
        said = f"{said[:-1]}, even under dynamo)" if under_dynamo == said else f"{said}; under dynamo: {under_dynamo}"
    raise Unmappable(f"torch.export cannot capture {what} {said}")


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """A failed attempt is reported in the import's own error; torch logs each one at length too."""
    loggers = [logging.getLogger(name) for name in ("torch._subclasses.fake_tensor", "torch.export", "torch._dynamo")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def _fixed_batch(ep: ExportedProgram) -> int | None:
    """The batch size an input's program is specialised to (``x.view(len(x), -1)``), or None."""
    for n in ep.graph.nodes:
        if n.op == "placeholder" and n.name in ep.graph_signature.user_inputs:
            val = n.meta.get("val")
            batch = val.shape[0] if isinstance(val, torch.Tensor) else None
            if batch is not None and not (isinstance(batch, torch.SymInt) and batch.node.expr.free_symbols):
                return int(batch)
    return None


def _why(exc: Exception) -> str:
    """Where (the user's line), what torch.export said, and what to change."""
    text = str(exc).strip()
    said = f"{type(exc).__name__}: {text.splitlines()[0][:300]}" if text else type(exc).__name__
    fix = ""
    if "data-dependent" in text or "DataDependent" in type(exc).__name__:
        fix = ("; its Python control flow depends on a tensor's values, which a program cannot hold: write the "
               "branch with torch.where or torch.cond, or move it out of forward")
    return f"{user_line(exc).strip() or 'in its forward'}: {said}{fix}"


def _example(value: torch.Tensor, device: torch.device) -> torch.Tensor:
    """An example tensor of ``value``'s shape and dtype on the module's device (the importer's values
    live on meta; a module built on meta is captured on meta)."""
    shape = (EXAMPLE_BATCH, *value.shape[1:])
    if value.dtype.is_floating_point:
        return torch.randn(shape, generator=torch.Generator().manual_seed(0)).to(device, value.dtype)
    return torch.zeros(shape, dtype=value.dtype, device=device)


def program_mapped(module: nn.Module, xs: list[torch.Tensor], what: str, inputs: list[fx.Node],
                   ep: ExportedProgram | None = None) -> Mapped:
    """The Program node for ``module(*xs)`` (captured as ``ep`` where given): its program, shapes and weights
    (``Mapped.state``)."""
    ep = ep or capture_module(module, xs, what)
    outs = _outputs(ep, what)
    try:
        program, sha = encode(ep)
    except ProgramError as exc:
        raise Unmappable(str(exc)) from None
    params = {"program": program, "sha256": sha, "source": what,
              "in_shapes": json.dumps([list(x.shape[1:]) for x in xs]),
              "out_shapes": json.dumps([[int(d) for d in o.shape[1:]] for o in outs])}
    # What the program module holds (strict export leaves out a buffer nothing reads), the module's own tensors
    program_module = ep.module(check_guards=False)
    state = {f"program.{k}": ep.state_dict.get(k, v).detach() for k, v in program_module.state_dict().items()}
    return Mapped(TYPE, params, inputs, state=state)


def capture_module(module: nn.Module, xs: list[torch.Tensor], what: str) -> ExportedProgram:
    """``module(*xs)`` captured at example tensors of ``xs``' shapes on the module's own device."""
    device = next((t.device for t in [*module.parameters(), *module.buffers()]), torch.device("cpu"))
    return capture(module, [_example(x, device) for x in xs], what)


def capture_model(module: nn.Module, shape: tuple[int, ...], dtype: str = "float32") -> ExportedProgram:
    """The whole model captured for a per-sample ``shape`` (Unmappable saying why it cannot be)."""
    x = torch.empty((EXAMPLE_BATCH, *shape), dtype=getattr(torch, dtype), device="meta")
    return capture_module(module, [x], type(module).__name__)


def _outputs(ep: ExportedProgram, what: str) -> list[torch.Tensor]:
    """The program's outputs as traced (fake tensors, the batch a symbol): one tensor or a flat tuple of
    tensors, each leading with the batch; Unmappable saying what else it returns."""
    spec = ep.call_spec.out_spec
    if spec is None or not (spec.is_leaf() or (spec.type in (tuple, list) and all(
            c.is_leaf() for c in spec.children()))):
        raise Unmappable(f"{what} returns {getattr(spec, 'type', None)}; a Program node gives tensors (one or a "
                         "flat tuple)")
    (returned,) = next(n for n in ep.graph.nodes if n.op == "output").args
    user = [n for n, s in zip(returned, ep.graph_signature.output_specs, strict=True) if s.kind == OutputKind.USER_OUTPUT]
    values = [n.meta.get("val") if isinstance(n, fx.Node) else n for n in user]
    outs = [v for v in values if isinstance(v, torch.Tensor)]
    if not outs or len(outs) != len(values):
        raise Unmappable(f"{what} returns something besides tensors; a Program node gives tensors")
    for i, o in enumerate(outs):  # nn.GRU's hidden state is [layers, batch, features]
        d0 = o.shape[0] if o.dim() else None
        if not (isinstance(d0, torch.SymInt) and d0.node.expr.free_symbols):
            raise Unmappable(f"output {i} of {what} does not lead with the batch (shape {list(o.shape)} for a "
                             f"batch of {EXAMPLE_BATCH})")
    return outs


def program_call(module: nn.Module, n: fx.Node, values: dict[fx.Node, Any], path: str) -> Mapped:
    """The Program node for the call ``n`` of the submodule at ``path``: every tensor argument an input,
    every other argument captured as it was; Unmappable saying why it cannot be one."""
    inputs: list[fx.Node] = []

    def slot(a: Any) -> Any:
        if isinstance(a, fx.Node):
            v = values.get(a)
            if isinstance(v, torch.Tensor):
                inputs.append(a)
                return _TENSOR
            if isinstance(v, list | tuple) and any(isinstance(t, torch.Tensor) for t in v):
                raise Unmappable(f"{path} takes a list of tensors; a Program node takes tensors one by one")
            return v
        if isinstance(a, list | tuple):
            return type(a)(slot(x) for x in a)
        return a

    args = tuple(slot(a) for a in n.args)
    kwargs = {k: slot(v) for k, v in n.kwargs.items()}
    if any(a is _TENSOR for a in args if isinstance(a, list | tuple)):
        raise Unmappable(f"{path} takes tensors inside a list")
    if not inputs:
        raise Unmappable(f"{path} takes no tensor")
    what = f"{path} ({type(module).__name__})"
    _leads_with_the_batch(values.get(n), what, BATCH)
    bound = _Bound(module, args, kwargs)
    return program_mapped(bound, [values[x] for x in inputs], what, inputs)


def _leads_with_the_batch(value: Any, what: str, batch: int) -> None:
    """Unmappable, before any capture, where the call's output (its value from the importer's meta run)
    cannot be a Program node's: not one tensor or a flat tuple of them, or a tensor that does not lead
    with the batch (nn.LSTM's ``(out, (h, c))``). A capture costs seconds (an LSTM's is unrolled step by
    step); sequencer2d_s captured each of its 36 LSTMs before widening to their 18 blocks."""
    outs = list(value) if isinstance(value, tuple | list) else [value]
    if not outs or not all(isinstance(o, torch.Tensor) for o in outs):
        raise Unmappable(f"{what} returns something besides tensors; a Program node gives tensors")
    for i, o in enumerate(outs):
        if o.dim() == 0 or int(o.shape[0]) != batch:
            raise Unmappable(f"output {i} of {what} does not lead with the batch (shape {list(o.shape)} for a "
                             f"batch of {batch})")


def whole_program(module: nn.Module, shape: tuple[int, ...], num_classes: int | None, name: str,
                  dtype: str = "float32", ep: ExportedProgram | None = None) -> tuple[Graph, dict[str, torch.Tensor]]:
    """The last resort: Input -> one Program node (the whole model, captured as ``ep`` where given) ->
    Output, its first output the graph's (auxiliary outputs, such as Inception's aux logits, stay unwired
    ports)."""
    x = torch.empty((EXAMPLE_BATCH, *shape), dtype=getattr(torch, dtype), device="meta")
    what = type(module).__name__
    mapped = program_mapped(module, [x], what, [], ep)
    outs = json.loads(mapped.params["out_shapes"])
    graph = Graph(InputSpec(shape, dtype), num_classes or (outs[0][-1] if len(outs[0]) == 1 else 1), {
        "name": name, "description": f"Imported from {what} as one exported program."})
    node_id = _node_id(what)
    graph.add_node("Input", "input")
    graph.add_node(TYPE, node_id, mapped.params)
    graph.add_node("Output", "output")
    graph.connect("input", node_id)
    graph.connect(node_id, "output")
    assert mapped.state is not None
    return graph, {f"{node_id}.{k}": v for k, v in mapped.state.items()}


def _node_id(name: str) -> str:
    cleaned = "".join(ch if ch.isalnum() else "_" for ch in name).strip("_").lower() or "program"
    return cleaned if cleaned[0].isalpha() and cleaned not in dir(nn.Module()) else f"program_{cleaned}"
