"""Undoable edits, free of Qt.

Each command checks itself when constructed (raising :class:`CommandError` with the
reason, so an invalid edit never reaches the undo stack), then ``redo``/``undo`` apply and
reverse it. The studio wraps these in ``QUndoCommand``; :class:`UndoStack` is the same
stack without Qt, for scripts and tests.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from .errors import CommandError, ParamError
from .events import Signal
from .graph import Edge, Graph, Group, InputSpec, Node
from .hierarchy import nesting_problem, prune


class Command(ABC):
    """Base class: ``text`` names the edit in the Edit menu ("Undo Add Conv2d")."""

    text = "edit"
    # An edit of how the network is shown (a block opened or closed, and what moved aside for it),
    # not of the network: undoable, but it leaves a saved file saved.
    view_only = False

    @abstractmethod
    def redo(self) -> None:
        """Apply the edit (also the first time: pushing a command runs ``redo``)."""

    @abstractmethod
    def undo(self) -> None:
        """Reverse the edit exactly, leaving the graph as it was before ``redo``."""


class AddNode(Command):
    def __init__(self, graph: Graph, type_: str, node_id: str | None = None,
                 params: dict[str, Any] | None = None, position: tuple[float, float] = (0.0, 0.0),
                 label: str = "") -> None:
        self.graph = graph
        probe = Graph()  # check type, id and params without touching the real graph
        probe.nodes = dict(graph.nodes)
        node = Graph.add_node(probe, type_, node_id, params, position, label)
        self.node = Node(node.id, node.type, dict(node.params), node.position, node.label)
        self.text = f"Add {type_}"

    @property
    def node_id(self) -> str:
        return self.node.id

    def redo(self) -> None:
        self.graph.insert_node(Node(self.node.id, self.node.type, dict(self.node.params), self.node.position,
                                    self.node.label))

    def undo(self) -> None:
        self.graph.remove_node(self.node.id)


class RemoveNodes(Command):
    """Remove nodes with their wires; undo restores nodes, wires (in order) and groups."""

    def __init__(self, graph: Graph, node_ids: Iterable[str]) -> None:
        self.graph = graph
        self.ids = [i for i in dict.fromkeys(node_ids)]
        for i in self.ids:
            graph.node(i)
        if not self.ids:
            raise CommandError("nothing to delete")
        self.text = f"Delete {len(self.ids)} nodes" if len(self.ids) > 1 else f"Delete {self.ids[0]}"
        self._nodes: list[tuple[int, Node]] = []
        self._edges: list[tuple[int, Edge]] = []
        self._groups: dict[str, Group] = {}

    def redo(self) -> None:
        g = self.graph
        gone = set(self.ids)
        self._edges = [(i, e) for i, e in enumerate(g.edges) if e.src in gone or e.dst in gone]
        self._groups = {k: _copy(v) for k, v in g.groups.items()}
        order = list(g.nodes)
        self._nodes = sorted(((order.index(i), g.nodes[i]) for i in self.ids), key=lambda t: t[0])
        for _, e in reversed(self._edges):
            g.remove_edge(e)
        for i in self.ids:
            g.remove_node(i)
        left = prune(g.groups)
        if left.keys() != g.groups.keys():
            g.set_groups(left)

    def undo(self) -> None:
        g = self.graph
        for index, n in self._nodes:  # ascending, so each index is right when it is used
            g.insert_node(n, index)
        for i, e in self._edges:
            g.add_edge(e, index=i, check=False)
        g.set_groups({k: _copy(v) for k, v in self._groups.items()})


class Connect(Command):
    """Wire an output port to an input port. A single input port that is already wired has
    its old wire replaced (``replaced`` says which), as dropping a wire on it would."""

    def __init__(self, graph: Graph, edge: Edge) -> None:
        self.graph = graph
        self.edge = edge
        problem = graph.connection_problem(edge)
        if problem:
            raise CommandError(f"cannot connect {edge}: {problem}", node=edge.dst)
        self.replaced = graph.occupied(edge.dst, edge.dst_port)
        self._replaced_at = -1
        self.text = f"Connect {edge.src} to {edge.dst}"

    def redo(self) -> None:
        if self.replaced is not None:
            self._replaced_at = self.graph.remove_edge(self.replaced)
        self.graph.add_edge(self.edge, check=False)

    def undo(self) -> None:
        self.graph.remove_edge(self.edge)
        if self.replaced is not None:
            self.graph.add_edge(self.replaced, index=self._replaced_at, check=False)


class Disconnect(Command):
    def __init__(self, graph: Graph, edge: Edge) -> None:
        if edge not in graph.edges:
            raise CommandError(f"there is no edge {edge}")
        self.graph, self.edge, self._index = graph, edge, -1
        self.text = f"Disconnect {edge.src} from {edge.dst}"

    def redo(self) -> None:
        self._index = self.graph.remove_edge(self.edge)

    def undo(self) -> None:
        self.graph.add_edge(self.edge, index=self._index, check=False)


class SetParam(Command):
    """Change one parameter; the value is checked against its schema first."""

    def __init__(self, graph: Graph, node_id: str, name: str, value: Any) -> None:
        node = graph.node(node_id)
        spec = node.spec
        if spec is None:
            raise CommandError(f"unknown layer type '{node.type}'", node=node_id)
        try:
            self.value = spec.param(name).check(value)
        except ParamError as exc:
            raise CommandError(exc.message, node=node_id, field=name) from None
        self.graph, self.node_id, self.name = graph, node_id, name
        self.old = node.params.get(name)
        self.text = f"Set {node_id}.{name}"

    def redo(self) -> None:
        self.graph.set_param(self.node_id, self.name, self.value)

    def undo(self) -> None:
        self.graph.set_param(self.node_id, self.name, self.old)


class RenameLabel(Command):
    def __init__(self, graph: Graph, node_id: str, label: str) -> None:
        self.graph, self.node_id, self.label = graph, node_id, label
        self.old = graph.node(node_id).label
        self.text = f"Rename {node_id}"

    def redo(self) -> None:
        self.graph.set_label(self.node_id, self.label)

    def undo(self) -> None:
        self.graph.set_label(self.node_id, self.old)


class MoveNodes(Command):
    """Move nodes to new positions (one undo step for a whole drag)."""

    def __init__(self, graph: Graph, positions: dict[str, tuple[float, float]]) -> None:
        self.graph = graph
        self.new = {k: (float(v[0]), float(v[1])) for k, v in positions.items()}
        self.old = {k: graph.node(k).position for k in positions}
        self.text = f"Move {len(positions)} nodes" if len(positions) > 1 else f"Move {next(iter(positions), '')}"

    def redo(self) -> None:
        for k, v in self.new.items():
            self.graph.move_node(k, v)

    def undo(self) -> None:
        for k, v in self.old.items():
            self.graph.move_node(k, v)


class GroupNodes(Command):
    """Collapse a selection into a named block. Groups nest: the selection may hold whole
    groups or lie inside one, but not hold part of a group and part of what is outside it."""

    def __init__(self, graph: Graph, name: str, node_ids: Iterable[str], group_id: str | None = None,
                 kind: str = "") -> None:
        ids = list(dict.fromkeys(node_ids))
        if not ids:
            raise CommandError("select nodes to group")
        for i in ids:
            graph.node(i)
        if not name.strip():
            raise CommandError("a group needs a name")
        self.graph = graph
        gid = group_id or _fresh(graph.groups, "group")
        self.group = Group(gid, name.strip(), ids, True, kind)
        problem = nesting_problem([*graph.groups.values(), self.group])
        if problem:
            raise CommandError(str(problem), node=problem.node)
        self.text = f"Group {len(ids)} nodes"

    def redo(self) -> None:
        self.graph.set_groups({**self.graph.groups, self.group.id: _copy(self.group)})

    def undo(self) -> None:
        self.graph.set_groups({k: v for k, v in self.graph.groups.items() if k != self.group.id})


def _copy(group: Group) -> Group:
    return replace(group, nodes=list(group.nodes))


class Ungroup(Command):
    def __init__(self, graph: Graph, group_id: str) -> None:
        if group_id not in graph.groups:
            raise CommandError(f"there is no group '{group_id}'")
        self.graph, self.group = graph, _copy(graph.groups[group_id])
        self.text = f"Ungroup {self.group.name}"

    def redo(self) -> None:
        self.graph.set_groups({k: v for k, v in self.graph.groups.items() if k != self.group.id})

    def undo(self) -> None:
        self.graph.set_groups({**self.graph.groups, self.group.id: _copy(self.group)})


class SetGroupCollapsed(Command):
    view_only = True

    def __init__(self, graph: Graph, group_id: str, collapsed: bool) -> None:
        if group_id not in graph.groups:
            raise CommandError(f"there is no group '{group_id}'")
        self.graph, self.group_id, self.collapsed = graph, group_id, collapsed
        self.text = f"{'Collapse' if collapsed else 'Expand'} {graph.groups[group_id].name}"

    def _set(self, collapsed: bool) -> None:
        g = self.graph.groups[self.group_id]
        groups = dict(self.graph.groups)
        groups[self.group_id] = replace(g, nodes=list(g.nodes), collapsed=collapsed)
        self.graph.set_groups(groups)

    def redo(self) -> None:
        self._set(self.collapsed)

    def undo(self) -> None:
        self._set(not self.collapsed)


class RenameGroup(Command):
    """Give a group another name (and kind)."""

    def __init__(self, graph: Graph, group_id: str, name: str, kind: str | None = None) -> None:
        if group_id not in graph.groups:
            raise CommandError(f"there is no group '{group_id}'")
        if not name.strip():
            raise CommandError("a group needs a name")
        g = graph.groups[group_id]
        self.graph, self.group_id = graph, group_id
        self.new = (name.strip(), g.kind if kind is None else kind.strip())
        self.old = (g.name, g.kind)
        self.text = f"Rename {g.name}"

    def _set(self, name: str, kind: str) -> None:
        groups = dict(self.graph.groups)
        groups[self.group_id] = replace(groups[self.group_id], name=name, kind=kind)
        self.graph.set_groups(groups)

    def redo(self) -> None:
        self._set(*self.new)

    def undo(self) -> None:
        self._set(*self.old)


class SetSpec(Command):
    """Change the input shape/dtype and the class count."""

    def __init__(self, graph: Graph, input_spec: InputSpec, num_classes: int) -> None:
        if not input_spec.shape or any(d < 1 for d in input_spec.shape):
            raise CommandError(f"input shape must be positive sizes, got {list(input_spec.shape)}", field="input.shape")
        if num_classes < 1:
            raise CommandError("the class count must be at least 1", field="num_classes")
        self.graph = graph
        self.new = (input_spec, num_classes)
        self.old = (graph.input_spec, graph.num_classes)
        self.text = "Change input spec"

    def redo(self) -> None:
        self.graph.set_spec(*self.new)

    def undo(self) -> None:
        self.graph.set_spec(*self.old)


class Macro(Command):
    """Several commands as one undo step."""

    def __init__(self, text: str, commands: list[Command] | None = None, view_only: bool = False) -> None:
        self.text = text
        self.commands = list(commands or [])
        self.view_only = view_only

    def redo(self) -> None:
        for c in self.commands:
            c.redo()

    def undo(self) -> None:
        for c in reversed(self.commands):
            c.undo()


def _fresh(existing: dict[str, Any], prefix: str) -> str:
    i = 1
    while f"{prefix}{i}" in existing:
        i += 1
    return f"{prefix}{i}"


class UndoStack:
    """A linear undo history with macros, matching ``QUndoStack``'s behaviour."""

    def __init__(self) -> None:
        self._done: list[Command] = []
        self._undone: list[Command] = []
        self._macros: list[Macro] = []
        self._clean_depth: int | None = 0
        self.changed = Signal()

    def push(self, command: Command) -> Command:
        """Apply ``command`` and record it (inside the open macro, if any)."""
        command.redo()
        if self._macros:
            self._macros[-1].commands.append(command)
        else:
            self._record(command)
        return command

    def _record(self, command: Command) -> None:
        self._done.append(command)
        if self._clean_depth is not None and self._clean_depth > len(self._done) - 1:
            self._clean_depth = None  # the clean state was in the discarded redo branch
        self._undone.clear()
        self.changed.emit()

    def begin_macro(self, text: str) -> None:
        """Start a compound edit: commands pushed until :meth:`end_macro` undo as one step."""
        self._macros.append(Macro(text))

    def end_macro(self) -> None:
        if not self._macros:
            raise CommandError("end_macro without begin_macro")
        macro = self._macros.pop()
        if self._macros:
            self._macros[-1].commands.append(macro)
        elif macro.commands:
            self._record(macro)

    @property
    def in_macro(self) -> bool:
        return bool(self._macros)

    def undo(self) -> None:
        if self._done:
            cmd = self._done.pop()
            cmd.undo()
            self._undone.append(cmd)
            self.changed.emit()

    def redo(self) -> None:
        if self._undone:
            cmd = self._undone.pop()
            cmd.redo()
            self._done.append(cmd)
            self.changed.emit()

    def can_undo(self) -> bool:
        return bool(self._done)

    def can_redo(self) -> bool:
        return bool(self._undone)

    def undo_text(self) -> str:
        return self._done[-1].text if self._done else ""

    def set_clean(self) -> None:
        self._clean_depth = len(self._done)

    def is_clean(self) -> bool:
        return self._clean_depth == len(self._done)
