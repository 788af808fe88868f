"""Import an existing ``nn.Module`` as a graph, through ``torch.fx``.

The module is traced symbolically, run once on the ``meta`` device (no memory, no weights
touched) to learn every tensor's shape, and each traced call becomes a catalog node by the
rules of :mod:`.rules`. Anything that does not map is collected, and one
:class:`ModuleImportError` lists every such op with its fx name and where it is in the
source, so a user can fix them all at once. The returned ``state_dict`` is keyed like the
module :func:`~graph_editor.building.fx.build_module` builds, so the weights load straight in.

Where fx cannot trace the model, or what it traced does not map, the model's exported program is mapped
instead (:mod:`.aten`: its ATen ops as the calls the rules read). This module holds the loop; its parts:
:mod:`.trace` (fx tracing and the ``meta`` run), :mod:`.convert` (one catalog node per traced call),
:mod:`.errors` (the grouped error that leads with the root cause), :mod:`.opaque` (which modules to keep
whole), :mod:`.capture` (torch.export capture of those as Program nodes, and of the whole model as the
last resort) and :mod:`.aten`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import fx, nn
from torch.export import ExportedProgram

from ..model import Graph, Group, InputSpec, validate
from ..model.block_layout import nested_layout
from ..model.hierarchy import groups_from_paths
from .aten import aten_graph
from .capture import capture_model, whole_program
from .convert import INVARIANT, Converter
from .errors import ModuleImportError, Unsupported, group_unsupported
from .opaque import widen
from .rules import Unmappable
from .trace import BATCH, feeds_embedding, input_users, prepare, propagate, trace

__all__ = ["ImportResult", "ModuleImportError", "Unsupported", "group_unsupported", "guess_input_shape",
           "import_module"]


@dataclass
class ImportResult:
    """The imported graph and the module's weights keyed for the built graph."""

    graph: Graph
    state_dict: dict[str, torch.Tensor]
    weights_from: str = ""      # the pretrained weights file loaded before the import ("": the module's own)


def import_module(module: nn.Module, input_shape: tuple[int, ...] | list[int], num_classes: int | None = None,
                  *, name: str | None = None, strict: bool = False) -> ImportResult:
    """Trace ``module`` and turn it into a graph for a per-sample ``input_shape``.

    ``num_classes`` defaults to the size of the module's output. What does not map is kept as
    Program nodes (the smallest enclosing submodule, see :mod:`.opaque`), or the whole model as one where
    none encloses it; with ``strict``, or where torch.export cannot capture it either, raises
    :class:`ModuleImportError` listing every op that does not map.
    """
    shape = tuple(int(d) for d in input_shape)
    if not shape or min(shape) < 1:
        raise ModuleImportError([], f"input shape must be positive sizes, got {list(shape)}")
    title = name or type(module).__name__
    captured: list[ExportedProgram | None] = []  # the whole model's program where fx could not trace it (None:
    try:                                           # torch.export could not either)
        return _import_traced(module, shape, num_classes, title, strict, captured)
    except ModuleImportError as exc:
        if strict or captured == [None]:
            raise
        return _import_whole(module, shape, num_classes, title, exc, captured[0] if captured else None)


def _import_traced(module: nn.Module, shape: tuple[int, ...], num_classes: int | None, name: str,
                   strict: bool, captured: list[ExportedProgram | None]) -> ImportResult:
    """Catalog nodes for what maps, a Program node for each smallest submodule around what does not.
    Where fx cannot trace the model, or an op fx traced does not map, the exported program's ATen ops are
    mapped instead (all or none: the program is kept in ``captured`` for the whole-model Program node)."""
    leaves: frozenset[str] = frozenset()
    while True:  # each round keeps the smallest modules around unmapped ops whole (Program nodes)
        gm, exported = _traced_or_exported(module, shape, leaves, captured)
        try:
            return _converted(module, gm, shape, num_classes, name, strict)
        except ModuleImportError as exc:
            if exported:
                raise
            hopeless = any(c in u.reason for u in exc.unsupported for c in INVARIANT)  # the ATen ops fail alike
            if not leaves and not hopeless and (done := _from_program(module, shape, num_classes, name, strict,
                                                                       captured)):
                return done  # Python's spelling did not map (x.flatten(0, 1) into a norm...); its ATen ops do
            wider = None if strict else widen(gm, exc.unsupported, leaves)
            if wider is None:
                raise
            leaves = wider


def _converted(module: nn.Module, gm: fx.GraphModule, shape: tuple[int, ...], num_classes: int | None, name: str,
               strict: bool) -> ImportResult:
    """The graph of ``gm``'s calls: ModuleImportError listing what does not map."""
    dtype = "int64" if feeds_embedding(gm) else "float32"
    values = propagate(gm, shape, dtype)
    graph = Graph(InputSpec(shape, dtype), num_classes or 1, {
        "name": name, "description": f"Imported from {type(module).__name__}."})
    converter = Converter(gm, values, graph, opaque=not strict)
    state = converter.run()
    if num_classes is None:
        out = next(n for n in gm.graph.nodes if n.op == "output").args[0]
        out = values[out[0] if isinstance(out, tuple | list) else out]  # (logits, aux): the first
        graph.num_classes = int(out.shape[-1]) if isinstance(out, torch.Tensor) and out.dim() == 2 else 1
    _check(graph, gm, values)
    graph.groups = _module_groups(module, converter.paths)
    for node_id, pos in nested_layout(graph).items():  # block by block, like the templates
        graph.nodes[node_id].position = pos
    return ImportResult(graph, state)


def _from_program(module: nn.Module, shape: tuple[int, ...], num_classes: int | None, name: str, strict: bool,
                  captured: list[ExportedProgram | None]) -> ImportResult | None:
    """The import from the model's exported program where every ATen op of it maps, else None (the
    program, or None where it could not be captured, kept in ``captured``)."""
    try:
        ep = capture_model(module, shape)
    except Unmappable:
        captured.append(None)
        return None
    captured.append(ep)
    try:
        return _converted(module, prepare(aten_graph(ep)), shape, num_classes, name, strict=True)
    except Exception:  # noqa: BLE001 -- any failure of this second way leaves the first one's result
        return None


def _traced_or_exported(module: nn.Module, shape: tuple[int, ...], leaves: frozenset[str],
                        captured: list[ExportedProgram | None]) -> tuple[fx.GraphModule, bool]:
    """The fx trace of ``module``; where fx cannot trace it, its exported program's ATen graph (the
    program kept in ``captured``) and True, or the trace's error where torch.export cannot capture it."""
    try:
        return trace(module, leaves), False
    except ModuleImportError as exc:
        if leaves:
            raise
        try:
            ep = capture_model(module, shape)
        except Unmappable as why:
            captured.append(None)
            raise ModuleImportError([], f"{exc.message.rstrip(':')}; and as one program: {why}") from None
        captured.append(ep)
        return prepare(aten_graph(ep)), True


def _import_whole(module: nn.Module, shape: tuple[int, ...], num_classes: int | None, name: str,
                  cause: ModuleImportError, ep: ExportedProgram | None = None) -> ImportResult:
    """The last resort: the whole model as one Program node (captured as ``ep`` where it already was); the
    error names both causes when even torch.export cannot capture it."""
    try:
        graph, state = whole_program(module, shape, num_classes, name, ep=ep)
    except Unmappable as exc:
        raise ModuleImportError(cause.unsupported, f"{cause.message.splitlines()[0].rstrip(':')}; and as one "
                                                   f"program: {exc}") from None
    inf = validate(graph, batch=BATCH)
    if not inf.ok:
        raise ModuleImportError([], f"the captured program does not validate: {inf.problems[0]}")
    for node_id, pos in nested_layout(graph).items():
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
        gm = trace(module)
    except ModuleImportError:
        return None
    users = input_users(gm)
    if len(users) == 1 and users[0].op == "call_module":
        mod = gm.get_submodule(str(users[0].target))
        if isinstance(mod, nn.Linear):
            return (mod.in_features,)
    return None


def _check(graph: Graph, gm: fx.GraphModule, values: dict[fx.Node, Any]) -> None:
    """The catalog must agree with PyTorch on every shape, or the import would be wrong."""
    inf = validate(graph, batch=BATCH)
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
