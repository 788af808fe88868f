"""Import an existing ``nn.Module`` as a graph, through ``torch.fx``.

The module is traced symbolically, run once on the ``meta`` device (no memory, no weights
touched) to learn every tensor's shape, and each traced call becomes a catalog node by the
rules of :mod:`.import_rules`. Anything that does not map is collected, and one
:class:`ModuleImportError` lists every such op with its fx name and where it is in the
source, so a user can fix them all at once. The returned ``state_dict`` is keyed like the
module :func:`~graph_editor.building.fx.build_module` builds, so the weights load straight in.

This module holds the loop; its parts: :mod:`.import_trace` (fx tracing and the ``meta`` run),
:mod:`.import_convert` (one catalog node per traced call), :mod:`.import_errors` (the grouped error
that leads with the root cause), :mod:`.opaque` (which modules to keep whole) and :mod:`.import_capture`
(torch.export capture of those as Program nodes, and of the whole model as the last resort).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import fx, nn

from ..model import Graph, Group, InputSpec, validate
from ..model.block_layout import nested_layout
from ..model.hierarchy import groups_from_paths
from .capture import whole_program
from .convert import Converter
from .errors import ModuleImportError, Unsupported, group_unsupported
from .opaque import widen
from .rules import Unmappable
from .trace import BATCH, feeds_embedding, input_users, propagate, trace

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
    try:
        return _import_traced(module, shape, num_classes, title, strict)
    except ModuleImportError as exc:
        if strict:
            raise
        return _import_whole(module, shape, num_classes, title, exc)


def _import_traced(module: nn.Module, shape: tuple[int, ...], num_classes: int | None, name: str,
                   strict: bool) -> ImportResult:
    """Catalog nodes for what maps, a Program node for each smallest submodule around what does not."""
    leaves: frozenset[str] = frozenset()
    while True:  # each round keeps the smallest modules around unmapped ops whole (Program nodes)
        gm = trace(module, leaves)
        dtype = "int64" if feeds_embedding(gm) else "float32"
        values = propagate(gm, shape, dtype)
        graph = Graph(InputSpec(shape, dtype), num_classes or 1, {
            "name": name, "description": f"Imported from {type(module).__name__}."})
        converter = Converter(gm, values, graph, opaque=not strict)
        try:
            state = converter.run()
            break
        except ModuleImportError as exc:
            wider = None if strict else widen(gm, exc.unsupported, leaves)
            if wider is None:
                raise
            leaves = wider
    if num_classes is None:
        out = next(n for n in gm.graph.nodes if n.op == "output").args[0]
        out = values[out[0] if isinstance(out, tuple | list) else out]  # (logits, aux): the first
        graph.num_classes = int(out.shape[-1]) if isinstance(out, torch.Tensor) and out.dim() == 2 else 1
    _check(graph, gm, values)
    graph.groups = _module_groups(module, converter.paths)
    for node_id, pos in nested_layout(graph).items():  # block by block, like the templates
        graph.nodes[node_id].position = pos
    return ImportResult(graph, state)


def _import_whole(module: nn.Module, shape: tuple[int, ...], num_classes: int | None, name: str,
                  cause: ModuleImportError) -> ImportResult:
    """The last resort: the whole model as one Program node; the error names both causes when even
    torch.export cannot capture it."""
    try:
        graph, state = whole_program(module, shape, num_classes, name)
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
