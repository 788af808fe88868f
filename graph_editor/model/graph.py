"""The graph: layer nodes with typed ports, and edges from output ports to input ports.

Mutating methods change the graph at once and emit events; undoable edits go through
:mod:`graph_editor.model.commands`, which call these methods and know how to reverse them.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from .catalog import LayerSpec, get_layer
from .errors import CommandError, ParamError
from .events import GraphEvents

ID_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
DTYPES = ("float32", "float16", "bfloat16", "int64")


@dataclass(frozen=True)
class Edge:
    """A wire from ``src``'s output port to ``dst``'s input port."""

    src: str
    dst: str
    src_port: str = "out"
    dst_port: str = "in"

    def __str__(self) -> str:
        return f"{self.src}.{self.src_port} -> {self.dst}.{self.dst_port}"


@dataclass
class Node:
    """One layer. ``id`` is stable and a Python identifier: the built module uses it as the
    submodule name, so everything measured on the module maps back to this node."""

    id: str
    type: str
    params: dict[str, Any] = field(default_factory=dict)
    position: tuple[float, float] = (0.0, 0.0)
    label: str = ""

    @property
    def spec(self) -> LayerSpec | None:
        return get_layer(self.type)

    @property
    def title(self) -> str:
        return self.label or self.id


@dataclass(frozen=True)
class InputSpec:
    """Per-sample input shape (no batch dimension) and dtype."""

    shape: tuple[int, ...] = (1, 28, 28)
    dtype: str = "float32"


@dataclass
class Group:
    """A named block of nodes; ``collapsed`` groups are drawn as one box.

    ``nodes`` holds every node inside, those of groups nested in it too (see
    :mod:`.hierarchy`); ``kind`` says what the block is, e.g. the module class it was
    imported from ("BasicBlock").
    """

    id: str
    name: str
    nodes: list[str]
    collapsed: bool = True
    kind: str = ""
    repeat: int = 1         # the block stands for this many copies in a chain (:mod:`.repeat`)


class Graph:
    """A network as a graph of layer nodes."""

    def __init__(self, input_spec: InputSpec | None = None, num_classes: int = 10,
                 metadata: dict[str, Any] | None = None) -> None:
        self.nodes: dict[str, Node] = {}
        self.edges: list[Edge] = []
        self.groups: dict[str, Group] = {}
        self.input_spec = input_spec or InputSpec()
        self.num_classes = num_classes
        self.metadata: dict[str, Any] = dict(metadata or {})
        self.events = GraphEvents()

    # ------------------------------------------------------------------ queries
    def __contains__(self, node_id: object) -> bool:
        return node_id in self.nodes

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes.values())

    def __len__(self) -> int:
        return len(self.nodes)

    def __repr__(self) -> str:
        nodes = ", ".join(f"{n.id}:{n.type}{n.params or ''}" for n in self)
        edges = ", ".join(str(e) for e in self.edges)
        return (f"Graph(input={self.input_spec.shape} {self.input_spec.dtype}, classes={self.num_classes}, "
                f"nodes=[{nodes}], edges=[{edges}])")

    def node(self, node_id: str) -> Node:
        try:
            return self.nodes[node_id]
        except KeyError:
            raise CommandError(f"there is no node '{node_id}'") from None

    def in_edges(self, node_id: str) -> list[Edge]:
        """Edges into ``node_id``, in port order and, within a variadic port, wiring order."""
        return self._port_order(node_id, [e for e in self.edges if e.dst == node_id])

    def in_edge_index(self) -> dict[str, list[Edge]]:
        """``in_edges`` of every node at once, in one pass over the edges (for whole-graph work)."""
        index: dict[str, list[Edge]] = {n: [] for n in self.nodes}
        for e in self.edges:
            index.setdefault(e.dst, []).append(e)
        return {n: self._port_order(n, edges) if len(edges) > 1 else edges for n, edges in index.items()}

    def _port_order(self, node_id: str, edges: list[Edge]) -> list[Edge]:
        node = self.nodes.get(node_id)
        spec = node.spec if node else None
        order = {p.name: i for i, p in enumerate(spec.inputs)} if spec else {}
        return sorted(edges, key=lambda e: order.get(e.dst_port, len(order)))

    def out_edges(self, node_id: str) -> list[Edge]:
        return [e for e in self.edges if e.src == node_id]

    def predecessors(self, node_id: str) -> list[str]:
        return [e.src for e in self.in_edges(node_id)]

    def successors(self, node_id: str) -> list[str]:
        return [e.dst for e in self.out_edges(node_id)]

    def is_blank(self) -> bool:
        """Only an Input and an Output, not wired: what File > New starts from. Nothing the user did
        is wrong yet, so views show it neutral, not red."""
        return not self.edges and all(n.type in ("Input", "Output") for n in self.nodes.values())

    def nodes_of_type(self, type_: str) -> list[Node]:
        return [n for n in self.nodes.values() if n.type == type_]

    def topological_order(self) -> list[str] | None:
        """Node ids with every node after its inputs, or None when there is a cycle."""
        indeg = {n: 0 for n in self.nodes}
        succ: dict[str, list[str]] = {n: [] for n in self.nodes}
        for e in self.edges:
            indeg[e.dst] += 1
            succ[e.src].append(e.dst)
        ready = [n for n, d in indeg.items() if d == 0]
        order: list[str] = []
        while ready:
            n = ready.pop(0)
            order.append(n)
            for m in succ[n]:
                indeg[m] -= 1
                if indeg[m] == 0:
                    ready.append(m)
        return order if len(order) == len(self.nodes) else None

    def reaches(self, start: str, goal: str) -> bool:
        """True when a path of edges leads from ``start`` to ``goal``."""
        succ: dict[str, list[str]] = {}
        for e in self.edges:
            succ.setdefault(e.src, []).append(e.dst)
        seen, stack = set(), [start]
        while stack:
            n = stack.pop()
            if n == goal:
                return True
            if n not in seen:
                seen.add(n)
                stack.extend(succ.get(n, ()))
        return False

    def new_id(self, prefix: str, taken: Iterable[str] = ()) -> str:
        """A fresh id ``prefix1``, ``prefix2``... not used by any node (nor in ``taken``)."""
        prefix = re.sub(r"\W", "_", prefix) or "node"
        if prefix[0].isdigit():
            prefix = "n" + prefix
        used = set(self.nodes) | set(taken)
        i = 1
        while f"{prefix}{i}" in used:
            i += 1
        return f"{prefix}{i}"

    def connection_problem(self, edge: Edge) -> str | None:
        """Why ``edge`` cannot be added (None when it can). A single input port that is
        already wired is not a problem here: the caller decides whether to replace it."""
        src, dst = self.nodes.get(edge.src), self.nodes.get(edge.dst)
        if src is None or dst is None:
            return f"there is no node '{edge.src if src is None else edge.dst}'"
        if edge.src == edge.dst:
            return "a node cannot feed itself"
        s_spec, d_spec = src.spec, dst.spec
        if s_spec is None or d_spec is None:
            return f"unknown layer type '{(src if s_spec is None else dst).type}'"
        if s_spec.output_port(edge.src_port) is None:
            return f"{src.id} has no output port '{edge.src_port}'"
        if s_spec.multi_output and edge.src_port not in (names := s_spec.outputs_for(src.params)):
            return f"{src.id} has {len(names)} outputs ({', '.join(names)}), not '{edge.src_port}'"
        if d_spec.input_port(edge.dst_port) is None:
            return f"{dst.id} has no input port '{edge.dst_port}'"
        if edge in self.edges:
            return "these ports are already connected"
        if self.reaches(edge.dst, edge.src):
            return f"it would make a cycle: {edge.dst} already feeds {edge.src}"
        return None

    def occupied(self, node_id: str, port: str) -> Edge | None:
        """The wire into a single (non-variadic) input port, if there is one."""
        spec = self.nodes[node_id].spec
        p = spec.input_port(port) if spec else None
        if p is None or p.variadic:
            return None
        return next((e for e in self.edges if e.dst == node_id and e.dst_port == port), None)

    # ---------------------------------------------------------------- mutations
    def add_node(self, type_: str, node_id: str | None = None, params: dict[str, Any] | None = None,
                 position: tuple[float, float] = (0.0, 0.0), label: str = "", *, check: bool = True) -> Node:
        """Add a node; params are checked against the catalog (``check=False`` keeps bad
        values, as loaded from a hand-edited file, for validation to report)."""
        spec = get_layer(type_)
        if check and spec is None:
            raise CommandError(f"unknown layer type '{type_}'")
        node_id = node_id or self.new_id(spec.prefix if spec else type_.lower())
        if not ID_RE.match(node_id):
            raise CommandError(f"node id '{node_id}' must be a Python identifier (letters, digits, _)")
        if node_id in self.nodes:
            raise CommandError(f"a node '{node_id}' already exists", node=node_id)
        values = dict(params or {})
        if check and spec is not None:
            try:
                values = spec.check_params(values)
            except ParamError as exc:  # located at the node
                raise CommandError(exc.message, node=node_id, field=exc.field) from None
        node = Node(node_id, type_, values, (float(position[0]), float(position[1])), label)
        self.insert_node(node)
        return node

    def insert_node(self, node: Node, index: int | None = None) -> None:
        """Put back an existing Node object (used by undo), at ``index`` in the node order
        when given, so that undo restores the order too (it decides the built module's order)."""
        if index is None or index >= len(self.nodes):
            self.nodes[node.id] = node
        else:
            items = list(self.nodes.items())
            items.insert(index, (node.id, node))
            self.nodes.clear()  # in place: views may hold this dict
            self.nodes.update(items)
        self.events.node_added.emit(node.id)
        self.events.changed.emit()

    def remove_node(self, node_id: str) -> Node:
        """Remove a node and every edge touching it."""
        for e in [e for e in self.edges if node_id in (e.src, e.dst)]:
            self.remove_edge(e)
        if any(node_id in g.nodes for g in self.groups.values()):
            # New Group objects: commands keep the old ones to restore them on undo.
            self.groups = {k: replace(g, nodes=[n for n in g.nodes if n != node_id])
                           for k, g in self.groups.items()}
            self.events.groups_changed.emit()
        node = self.nodes.pop(node_id)
        self.events.node_removed.emit(node_id)
        self.events.changed.emit()
        return node

    def add_edge(self, edge: Edge, index: int | None = None, *, check: bool = True) -> Edge:
        if check:
            problem = self.connection_problem(edge)
            if problem:
                raise CommandError(f"cannot connect {edge}: {problem}", node=edge.dst)
        self.edges.insert(len(self.edges) if index is None else index, edge)
        self.events.edge_added.emit(edge)
        self.events.changed.emit()
        return edge

    def connect(self, src: str, dst: str, src_port: str = "out", dst_port: str = "in") -> Edge:
        return self.add_edge(Edge(src, dst, src_port, dst_port))

    def remove_edge(self, edge: Edge) -> int:
        """Remove ``edge``; returns where it was so undo can put it back in order."""
        try:
            index = self.edges.index(edge)
        except ValueError:
            raise CommandError(f"there is no edge {edge}") from None
        del self.edges[index]
        self.events.edge_removed.emit(edge)
        self.events.changed.emit()
        return index

    def set_param(self, node_id: str, name: str, value: Any) -> None:
        self.nodes[node_id].params[name] = value
        self.events.params_changed.emit(node_id, name)
        self.events.changed.emit()

    def move_node(self, node_id: str, position: tuple[float, float]) -> None:
        self.nodes[node_id].position = (float(position[0]), float(position[1]))
        self.events.node_moved.emit(node_id)

    def set_label(self, node_id: str, label: str) -> None:
        self.nodes[node_id].label = label
        self.events.params_changed.emit(node_id, "label")
        self.events.changed.emit()

    def set_groups(self, groups: dict[str, Group]) -> None:
        self.groups = groups
        self.events.groups_changed.emit()
        self.events.changed.emit()

    def set_spec(self, input_spec: InputSpec, num_classes: int) -> None:
        self.input_spec = input_spec
        self.num_classes = num_classes
        self.events.spec_changed.emit()
        self.events.changed.emit()

    def set_metadata(self, key: str, value: Any) -> None:
        """Set one metadata entry (None removes it)."""
        if value is None:
            self.metadata.pop(key, None)
        else:
            self.metadata[key] = value
        self.events.metadata_changed.emit(key)
        self.events.changed.emit()

    def clear(self) -> None:
        for node_id in list(self.nodes):
            self.remove_node(node_id)
        self.set_groups({})

    # ---------------------------------------------------------------- builders
    def chain(self, *steps: tuple[str, str, dict[str, Any]] | tuple[str, str], start: str | None = None,
              position: tuple[float, float] | None = None, dx: float = 180.0) -> str:
        """Add ``(type, id[, params])`` steps wired one after another from ``start``.

        Returns the id of the last node: templates and tests build networks with it.
        """
        prev = start
        x, y = position or ((self.nodes[start].position[0] + dx, self.nodes[start].position[1])
                            if start else (0.0, 0.0))
        for step in steps:
            type_, node_id, *rest = step
            params = rest[0] if rest else {}
            self.add_node(type_, node_id, params, (x, y))
            if prev is not None:
                self.connect(prev, node_id, dst_port=_first_input(type_))
            prev, x = node_id, x + dx
        if prev is None:
            raise CommandError("chain needs at least one step or a start node")
        return prev

    def copy(self) -> Graph:
        from .serialize import graph_from_dict, graph_to_dict

        return graph_from_dict(graph_to_dict(self))

    def snapshot(self) -> Graph:
        """The graph as it is now, for reading while this one goes on being edited (the studio's
        background analysis): new Node, Group and metadata objects, no listeners, nothing checked
        again. Edits replace parameter values, never change them in place, so the values are shared.
        A 20,000-node graph takes milliseconds (:meth:`copy` checks everything again)."""
        other = Graph(self.input_spec, self.num_classes, copy.deepcopy(self.metadata))
        other.nodes = {k: Node(n.id, n.type, dict(n.params), n.position, n.label) for k, n in self.nodes.items()}
        other.edges = list(self.edges)
        other.groups = {k: replace(g, nodes=list(g.nodes)) for k, g in self.groups.items()}
        return other


def _first_input(type_: str) -> str:
    spec = get_layer(type_)
    return spec.inputs[0].name if spec and spec.inputs else "in"
