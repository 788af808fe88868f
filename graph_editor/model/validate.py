"""Validation: every problem of a graph, each attached to a node (and port or field).

Shape inference runs the catalog's pure-Python shape rules in topological order, so the
editor can check a graph on every keystroke without torch.
"""

from __future__ import annotations

import keyword
import math
from dataclasses import dataclass, field
from typing import Any, cast

from .catalog import INT_LIMIT, Shape, fmt_shape, output_index
from .errors import ParamError, ShapeError
from .graph import Edge, Graph


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a graph, located at a node (None for graph-wide problems)."""

    node: str | None
    message: str
    port: str | None = None
    field: str | None = None
    severity: str = "error"  # or "warning"

    def __str__(self) -> str:
        where = self.node or "graph"
        if self.port:
            where += f".{self.port}"
        elif self.field:
            where += f" [{self.field}]"
        return f"{where}: {self.message}"


@dataclass
class Inference:
    """Output shape of every node that could be inferred, and every problem found."""

    shapes: dict[str, Shape] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    order: list[str] = field(default_factory=list)
    in_edges: dict[str, list[Edge]] = field(default_factory=dict)  # per node, in port order
    params: dict[str, dict[str, Any]] = field(default_factory=dict)  # checked, defaults filled in
    # Every output's shape of the nodes with several outputs (``shapes`` holds their first).
    port_shapes: dict[str, list[Shape]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(p.severity == "error" for p in self.problems)

    def shape_at(self, node_id: str, port: str = "out") -> Shape | None:
        """The shape leaving ``node_id`` at output ``port`` (None when it could not be inferred)."""
        outs = self.port_shapes.get(node_id)
        if outs is None:
            return self.shapes.get(node_id)  # one output
        i = output_index(port)
        return outs[i] if i is not None and i < len(outs) else None

    def edge_shape(self, edge: Edge) -> Shape | None:
        """The shape an edge carries: its source's output at the edge's source port."""
        return self.shape_at(edge.src, edge.src_port)

    def errors_by_node(self) -> dict[str | None, list[Problem]]:
        out: dict[str | None, list[Problem]] = {}
        for p in self.problems:
            out.setdefault(p.node, []).append(p)
        return out


def validate(graph: Graph, batch: int = 1) -> Inference:
    """Check structure, parameters and shapes; never raises for a bad graph."""
    result = Inference()
    problems = result.problems
    _check_io_nodes(graph, problems)
    order = graph.topological_order()
    if order is None:
        _report_cycle(graph, problems)
        return result
    result.order = order
    result.in_edges = in_edges = graph.in_edge_index()
    result.params = params_ok = _check_params(graph, problems)
    integer = {n.id for n in graph.nodes_of_type("Input")} if graph.input_spec.dtype == "int64" else set()
    for node_id in order:
        node = graph.nodes[node_id]
        spec = node.spec
        if spec is None:
            continue
        if node.type == "Input":
            result.shapes[node_id] = (batch, *graph.input_spec.shape)
            if (size := math.prod(graph.input_spec.shape)) > INT_LIMIT:
                problems.append(Problem(node_id, f"the input shape {fmt_shape(graph.input_spec.shape, batch=True)}"
                                                 f" holds {size:.3g} values per sample, beyond any device "
                                                 f"(at most {INT_LIMIT:,})", field="shape"))
                del result.shapes[node_id]
            continue
        # A layer without inputs (a learnable Parameter) is a source too: its rule gets no shapes.
        wired = _wired_inputs(graph, node_id, in_edges[node_id], problems)
        if wired is None or node_id not in params_ok:
            continue
        shapes = [s for e in wired if (s := result.edge_shape(e)) is not None]
        if len(shapes) < len(wired):
            continue  # an upstream problem is already reported
        if not _dtype_ok(node.type, [e.src in integer for e in wired], integer, node_id, problems):
            continue
        try:
            inferred = spec.infer(params_ok[node_id], shapes)
        except ShapeError as exc:
            problems.append(Problem(node_id, f"{spec.display} {node.title} {exc.message}", field=exc.field))
            continue
        # A layer with several outputs gives one shape per output (its rule's documented contract)
        outs = ([tuple(o) for o in cast("list[Shape]", inferred)] if spec.multi_output
                else [tuple(cast("Shape", inferred))])
        if (size := max(math.prod(o[1:]) for o in outs)) > INT_LIMIT:
            problems.append(Problem(node_id, f"{spec.display} {node.title} makes {size:.3g} values per sample, "
                                             f"beyond any device (at most {INT_LIMIT:,})"))
            continue
        result.shapes[node_id] = out = outs[0]
        if spec.multi_output:
            result.port_shapes[node_id] = outs
        if node.type == "Output":
            _check_logits(graph, node_id, tuple(out), problems, batch)
    _check_reachability(graph, problems)
    return result


# Layers that only move values around, so integer category codes pass through them unchanged.
_INTEGER_SAFE = frozenset({"Flatten", "Reshape", "Permute", "Identity", "SelectToken", "Concat"})


def _dtype_ok(type_: str, from_integer: list[bool], integer: set[str], node_id: str,
              problems: list[Problem]) -> bool:
    """Integer (int64) inputs are category codes: an Embedding turns them into vectors, shape
    layers pass them on, and any other layer would fail on them in PyTorch."""
    if type_ == "Embedding" or not any(from_integer):
        return True
    if type_ in _INTEGER_SAFE:
        if all(from_integer):
            integer.add(node_id)
        return True
    problems.append(Problem(node_id, f"{type_} receives integer category codes (int64 input); "
                                     "embed them first with an Embedding layer", port="in"))
    return False


def _check_io_nodes(graph: Graph, problems: list[Problem]) -> None:
    for type_ in ("Input", "Output"):
        nodes = graph.nodes_of_type(type_)
        if not nodes:
            problems.append(Problem(None, f"the graph has no {type_} node"))
        for extra in nodes[1:]:
            problems.append(Problem(extra.id, f"only one {type_} node is allowed ({nodes[0].id} is the first)"))


def _report_cycle(graph: Graph, problems: list[Problem]) -> None:
    """Every node on a cycle (in a strongly connected component of more than one node, or wired to
    itself), in one linear pass."""
    on_cycle = set().union(*(c for c in strongly_connected(graph) if len(c) > 1))
    on_cycle.update(e.src for e in graph.edges if e.src == e.dst)
    for n in graph.nodes:
        if n in on_cycle:
            problems.append(Problem(n, "is part of a cycle: a network must flow one way from Input to Output"))


def strongly_connected(graph: Graph) -> list[set[str]]:
    """Tarjan's strongly connected components, iterative (a 20000-node ring must not recurse)."""
    succ: dict[str, list[str]] = {n: [] for n in graph.nodes}
    for e in graph.edges:
        if e.src in succ and e.dst in succ:
            succ[e.src].append(e.dst)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    for root in graph.nodes:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            children = succ[node]
            while i < len(children) and children[i] in index:
                if children[i] in on_stack:
                    low[node] = min(low[node], index[children[i]])
                i += 1
            if i < len(children):
                work.append((node, i + 1))
                work.append((children[i], 0))
                continue
            if low[node] == index[node]:
                component = set()
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    component.add(m)
                    if m == node:
                        break
                components.append(component)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return components


def _check_params(graph: Graph, problems: list[Problem]) -> dict[str, dict[str, Any]]:
    ok = {}
    for node in graph:
        if keyword.iskeyword(node.id):
            # The built module names the node's submodule by its id, and `self.class` is not Python.
            problems.append(Problem(node.id, f"the id '{node.id}' is a Python keyword, which cannot name a PyTorch "
                                             "submodule; rename the node", field="id"))
            continue
        spec = node.spec
        if spec is None:
            problems.append(Problem(node.id, f"unknown layer type '{node.type}'", field="type"))
            continue
        try:
            ok[node.id] = spec.check_params(node.params)
        except ParamError as exc:
            problems.append(Problem(node.id, exc.message, field=exc.field))
    return ok


def _wired_inputs(graph: Graph, node_id: str, edges: list[Edge], problems: list[Problem]) -> list[Edge] | None:
    """The wires into the node in port order, or None (with problems) when miswired."""
    node = graph.nodes[node_id]
    spec = node.spec
    assert spec is not None
    srcs: list[Edge] = []
    good = True
    for port in spec.inputs:
        wires = [e for e in edges if e.dst_port == port.name]
        if len(wires) > 1 and len(set(wires)) < len(wires):  # only a hand-edited file or script can do this; files refuse it
            twice = next(e for e in wires if wires.count(e) > 1)
            problems.append(Problem(node_id, f"the wire from {twice.src} to '{port.name}' appears twice",
                                    port=port.name))
            good = False
        if port.variadic:
            if len(wires) < port.min_count:
                problems.append(Problem(node_id, f"needs at least {port.min_count} inputs on '{port.name}', "
                                                 f"has {len(wires)}", port=port.name))
                good = False
        elif not wires:
            problems.append(Problem(node_id, f"input '{port.name}' is not connected", port=port.name))
            good = False
        elif len(wires) > 1:
            froms = ", ".join(e.src for e in wires)
            problems.append(Problem(node_id, f"input '{port.name}' is connected twice ({froms})", port=port.name))
            good = False
        srcs.extend(wires)
    for e in edges:
        if spec.input_port(e.dst_port) is None:
            problems.append(Problem(node_id, f"has no input port '{e.dst_port}' (wired from {e.src})", port=e.dst_port))
            good = False
        elif (why := _missing_output(graph, e)) is not None:
            problems.append(Problem(node_id, f"input '{e.dst_port}' is wired from {e.src}.{e.src_port}, but {why}",
                                    port=e.dst_port))
            good = False
    return srcs if good else None


def _missing_output(graph: Graph, e: Edge) -> str | None:
    """Why the wire's source has no output ``e.src_port`` (a Split cut to fewer parts), or None."""
    src = graph.nodes.get(e.src)
    spec = src.spec if src is not None else None
    if spec is None or src is None:
        return None
    names = spec.outputs_for(src.params)
    if e.src_port in names:
        return None
    if len(names) == 1:
        return f"{spec.display} {src.title} has one output, '{names[0]}'"
    return f"{spec.display} {src.title} has {len(names)} outputs ({', '.join(names)})"


def _check_logits(graph: Graph, node_id: str, shape: Shape, problems: list[Problem], batch: int) -> None:
    expected = graph.num_classes
    if len(shape) != 2 or shape[1] != expected:
        problems.append(Problem(node_id, f"Output expects logits of shape {expected} (one per class), "
                                         f"receives {fmt_shape(shape)}", port="in"))
    elif shape[0] != batch:   # e.g. a learnable Parameter that never meets the input: one row for every sample
        problems.append(Problem(node_id, f"Output expects one row of logits per sample ({batch}), receives "
                                         f"{shape[0]}: its input does not depend on the network's Input", port="in"))


def _check_reachability(graph: Graph, problems: list[Problem]) -> None:
    inputs = graph.nodes_of_type("Input")
    outputs = graph.nodes_of_type("Output")
    if not inputs or not outputs:
        return
    preds: dict[str, list[str]] = {}
    for e in graph.edges:
        preds.setdefault(e.dst, []).append(e.src)
    feeds_output, stack = set(), [outputs[0].id]
    while stack:
        n = stack.pop()
        if n not in feeds_output:
            feeds_output.add(n)
            stack.extend(preds.get(n, ()))
    for node in graph:
        if node.spec is None or node.type in ("Input", "Output"):
            continue
        if node.id not in feeds_output:
            problems.append(Problem(node.id, "does not lead to the Output: its result is unused",
                                    severity="warning"))
