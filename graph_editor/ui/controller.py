"""The editor's controller: every edit the canvas or a dock asks for becomes one undo step.

Views emit *intents* with node ids; the controller turns each into the model's commands
(:mod:`graph_editor.model.commands`) wrapped in :class:`~graph_editor.ui.undo.ModelCommand`
on a ``QUndoStack``. An edit the model refuses never reaches the stack: the intent returns
the reason (and emits it on ``refused``), so a view can show it where the user is looking.
"""

from __future__ import annotations

import atexit
import functools
from collections.abc import Callable, Iterable
from typing import Any

from PySide6.QtCore import QMimeData, QObject, Signal
from PySide6.QtGui import QGuiApplication, QUndoStack

from ..model import (
    AddNode,
    Command,
    Connect,
    Disconnect,
    Edge,
    Graph,
    GraphError,
    GroupNodes,
    InputSpec,
    Macro,
    MoveNodes,
    RemoveNodes,
    RenameLabel,
    SetGroupCollapsed,
    SetParam,
    SetSpec,
    get_layer,
)
from ..model.block_layout import nested_layout
from ..model.layout import layered_layout
from . import clipboard
from .background import collection_paused, freeze_survivors, thaw
from .block_edits import Apply, BlockEdits
from .mime import GRAPH_MIME
from .training_edits import TrainingEdits
from .undo import ModelCommand

PASTE_OFFSET = 40.0
FREEZE_AT = 2000  # nodes: from this size what a graph's views made is left out of the collector's walks


class EditorController(BlockEdits, TrainingEdits, QObject):
    """Turns intents (node ids, ports, values) into undoable model commands.

    Every intent returns ``None`` when it was applied and a reason string when it was
    refused; the reason is also emitted on ``refused``.
    """

    graph_replaced = Signal(object)  # Graph
    refused = Signal(str)
    node_added = Signal(str)
    selection_changed = Signal(list)

    def __init__(self, graph: Graph, undo_stack: QUndoStack, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._graph = graph
        self.undo_stack = undo_stack
        self.last_added: str | None = None
        self.last_pasted: list[str] = []
        self._selection: list[str] = []
        self.last_group: str | None = None
        self.size_hint: Callable[[], dict[str, tuple[float, float]]] | None = None  # node boxes, from the canvas

    # ---------------------------------------------------------------- the graph
    @property
    def graph(self) -> Graph:
        return self._graph

    def set_graph(self, graph: Graph) -> None:
        """Edit another graph (new file, open): the undo history belongs to the old one.

        The views rebuild with the collector paused, and what a big graph made is then left out of its
        walks (:func:`~graph_editor.ui.background.freeze_survivors`): on a 20,000-layer chain it walked
        the new items four times in the first seconds, 1.9 s of a 3.5 s open, and found nothing to free."""
        with collection_paused():
            thaw()
            self.undo_stack.clear()
            self._graph = graph
            self._selection = []
            self.graph_replaced.emit(graph)
            self.selection_changed.emit([])
            if len(graph) >= FREEZE_AT:   # before the collector resumes: its first walk would take them all
                freeze_survivors()

    # ---------------------------------------------------------------- selection
    @property
    def selection(self) -> list[str]:
        return list(self._selection)

    def select(self, ids: Iterable[str]) -> None:
        """Make ``ids`` (nodes or group ids) the selection; unknown ids are dropped."""
        known = set(self._graph.nodes) | set(self._graph.groups)
        ids = [i for i in dict.fromkeys(ids) if i in known]
        if ids != self._selection:
            self._selection = ids
            self.selection_changed.emit(list(ids))

    def select_all(self) -> None:
        self.select(self._graph.nodes)

    def expand_ids(self, ids: Iterable[str]) -> list[str]:
        """Node ids for ``ids`` where a group id stands for all of its nodes."""
        out: list[str] = []
        for i in ids:
            group = self._graph.groups.get(i)
            out.extend(group.nodes if group else [i])
        return list(dict.fromkeys(out))

    # ---------------------------------------------------------------- plumbing
    def _refuse(self, reason: str) -> str:
        self.refused.emit(reason)
        return reason

    def _push(self, make: Callable[[], Command]) -> str | None:
        """Build a command (which checks itself) and push it; a refusal returns its reason."""
        try:
            command = make()
        except GraphError as exc:
            return self._refuse(exc.message)
        self.undo_stack.push(ModelCommand(command))
        return None

    def _compound(self, text: str, steps: Callable[[Apply], Any], view_only: bool = False) -> str | None:
        """Apply several commands as one undo step; if any is refused, none stays applied.
        ``view_only``: the step changes how the network is shown, not the network."""
        macro = Macro(text, view_only=view_only)

        def apply(command: Command) -> Command:
            command.redo()
            macro.commands.append(command)
            return command

        try:
            steps(apply)
        except GraphError as exc:
            macro.undo()
            return self._refuse(exc.message)
        if macro.commands:
            self.undo_stack.push(ModelCommand(macro, applied=True))
        return None

    # ---------------------------------------------------------------- intents
    def add_node(self, type_: str, pos: tuple[float, float] = (0.0, 0.0),
                 params: dict[str, Any] | None = None) -> str | None:
        """Add a layer of ``type_`` at ``pos``; its id is in ``last_added`` and ``node_added``."""
        holder: list[AddNode] = []

        def make() -> Command:
            holder.append(AddNode(self._graph, type_, None, params, pos))
            return holder[0]

        reason = self._push(make)
        if reason is None:
            self.last_added = holder[0].node_id
            self.node_added.emit(self.last_added)
        return reason

    def add_connected(self, type_: str, pos: tuple[float, float], src: tuple[str, str] | None = None,
                      dst: tuple[str, str] | None = None) -> str | None:
        """Add a layer wired from output ``src`` (node, port) and/or to input ``dst``, in one
        undo step (a wire dropped on empty canvas, then a layer chosen)."""
        holder: list[str] = []

        def steps(apply: Apply) -> None:
            node = apply(AddNode(self._graph, type_, None, None, pos))
            holder.append(node.node_id)
            spec = get_layer(type_)
            if src is not None and spec is not None and spec.inputs:
                apply(Connect(self._graph, Edge(src[0], node.node_id, src[1], spec.inputs[0].name)))
            if dst is not None and spec is not None and spec.outputs:
                apply(Connect(self._graph, Edge(node.node_id, dst[0], spec.outputs[0].name, dst[1])))

        reason = self._compound(f"Add {type_}", steps)
        if reason is None:
            self.last_added = holder[0]
            self.node_added.emit(holder[0])
            self.select([holder[0]])
        return reason

    def remove_nodes(self, ids: Iterable[str]) -> str | None:
        """Delete nodes (a group id deletes its nodes) with their wires."""
        node_ids = self.expand_ids(ids)
        reason = self._push(lambda: RemoveNodes(self._graph, node_ids))
        if reason is None:
            self.select(i for i in self._selection if i not in node_ids)
        return reason

    def delete(self, ids: Iterable[str], edges: Iterable[Edge] = ()) -> str | None:
        """Delete nodes (and groups' nodes) and wires in one undo step (the Delete key)."""
        node_ids = self.expand_ids(ids)
        gone = set(node_ids)
        wires = [e for e in dict.fromkeys(edges) if e.src not in gone and e.dst not in gone]
        if not node_ids and not wires:
            return self._refuse("nothing is selected to delete")
        if not wires:
            return self.remove_nodes(node_ids)
        if not node_ids:
            return self.disconnect_many(wires)

        def steps(apply: Apply) -> None:
            for e in wires:
                apply(Disconnect(self._graph, e))
            apply(RemoveNodes(self._graph, node_ids))

        reason = self._compound(f"Delete {len(node_ids)} nodes and {len(wires)} wires", steps)
        if reason is None:
            self.select(i for i in self._selection if i not in gone)
        return reason

    def connection_problem(self, src: str, src_port: str, dst: str, dst_port: str) -> str | None:
        """Why this wire cannot be drawn (None when it can); the canvas asks while dragging."""
        return self._graph.connection_problem(Edge(src, dst, src_port, dst_port))

    def connect(self, src: str, src_port: str, dst: str, dst_port: str) -> str | None:
        """Wire an output to an input; an occupied single input has its wire replaced."""
        return self._push(lambda: Connect(self._graph, Edge(src, dst, src_port, dst_port)))

    def rewire(self, old: Edge, src: str, src_port: str, dst: str, dst_port: str) -> str | None:
        """Move a wire's end (a wire picked up from an input and dropped on another), one step."""
        new = Edge(src, dst, src_port, dst_port)
        if new == old:
            return None

        def steps(apply: Apply) -> None:
            apply(Disconnect(self._graph, old))
            apply(Connect(self._graph, new))

        return self._compound(f"Reconnect {src} to {dst}", steps)

    def disconnect(self, edge: Edge) -> str | None:
        return self._push(lambda: Disconnect(self._graph, edge))

    def disconnect_many(self, edges: Iterable[Edge]) -> str | None:
        """Cut several wires in one undo step (a cut line across them)."""
        edges = list(dict.fromkeys(edges))
        if len(edges) == 1:
            return self.disconnect(edges[0])
        return self._compound(f"Cut {len(edges)} wires",
                              lambda apply: [apply(Disconnect(self._graph, e)) for e in edges])

    def set_param(self, node_id: str, name: str, value: Any) -> str | None:
        return self._push(lambda: SetParam(self._graph, node_id, name, value))

    def move_nodes(self, positions: dict[str, tuple[float, float]]) -> str | None:
        """Move nodes (one undo step for a whole drag); positions that did not change are skipped."""
        moved = {k: (float(v[0]), float(v[1])) for k, v in positions.items()
                 if k in self._graph.nodes and tuple(self._graph.nodes[k].position) != (float(v[0]), float(v[1]))}
        if not moved:
            return None
        return self._push(lambda: MoveNodes(self._graph, moved))

    def rename(self, node_id: str, label: str) -> str | None:
        return self._push(lambda: RenameLabel(self._graph, node_id, label))

    def set_spec(self, input_spec: InputSpec, num_classes: int) -> str | None:
        return self._push(lambda: SetSpec(self._graph, input_spec, num_classes))

    def auto_layout(self, ids: Iterable[str] | None = None,
                    sizes: dict[str, tuple[float, float]] | None = None) -> str | None:
        """Lay out (some of) the nodes left to right, as one Move step."""
        node_ids = self.expand_ids(ids) if ids is not None else None
        if sizes is None and self.size_hint is not None:
            sizes = self.size_hint()
        if node_ids is None and self._graph.groups and self._graph.nodes:  # the whole graph: block by block
            x0 = min(n.position[0] for n in self._graph)
            y0 = min(n.position[1] for n in self._graph)
            positions = nested_layout(self._graph, sizes, origin=(x0, y0))
        else:
            positions = layered_layout(self._graph, node_ids, sizes)
        if not positions:
            return self._refuse("there are no nodes to lay out")
        return self.move_nodes(positions)

    # ---------------------------------------------------------------- clipboard
    def copy(self, ids: Iterable[str], to_clipboard: bool = True) -> str:
        """The sub-graph of ``ids`` (nodes and the wires between them) as JSON text;
        also put on the system clipboard as GRAPH_MIME and plain text."""
        text = clipboard.subgraph_json(self._graph, self.expand_ids(ids))
        if to_clipboard:
            data = QMimeData()
            data.setData(GRAPH_MIME, text.encode("utf-8"))
            data.setText(text)
            QGuiApplication.clipboard().setMimeData(data)
            _release_clipboard_at_exit()
        return text

    def cut(self, ids: Iterable[str]) -> str | None:
        """Copy, then delete, the nodes."""
        ids = self.expand_ids(ids)
        if not ids:
            return self._refuse("nothing to cut")
        self.copy(ids)
        return self.remove_nodes(ids)

    def clipboard_text(self) -> str:
        """What the system clipboard holds for a paste (GRAPH_MIME first, then text)."""
        data = QGuiApplication.clipboard().mimeData()
        if data is not None and data.hasFormat(GRAPH_MIME):
            return bytes(data.data(GRAPH_MIME).data()).decode("utf-8", errors="replace")
        return data.text() if data is not None else ""

    def paste(self, text: str | None = None, at: tuple[float, float] | None = None) -> list[str] | str:
        """Add copied nodes with fresh ids as one undo step; returns the new ids (selected)
        or the reason the text cannot be pasted."""
        text = self.clipboard_text() if text is None else text
        try:
            nodes, edges = clipboard.parse_subgraph(text)
        except ValueError as exc:
            return self._refuse(str(exc))
        try:
            groups = clipboard.parse_groups(text)
        except ValueError as exc:
            return self._refuse(str(exc))
        placed = clipboard.place(nodes, at, PASTE_OFFSET)
        new_ids: dict[str, str] = {}

        def steps(apply: Apply) -> None:
            for old_id, type_, params, pos, label in placed:
                new_id = self._graph.new_id(_prefix(type_, old_id))
                new_ids[old_id] = apply(AddNode(self._graph, type_, new_id, params, pos, label)).node_id
            for e in edges:
                apply(Connect(self._graph, Edge(new_ids[e.src], new_ids[e.dst], e.src_port, e.dst_port)))
            for name, kind, collapsed, members in groups:  # outer ones first; each checks its nesting
                group = apply(GroupNodes(self._graph, name, [new_ids[n] for n in members], kind=kind)).group
                if not collapsed:
                    apply(SetGroupCollapsed(self._graph, group.id, False))

        reason = self._compound(f"Paste {len(placed)} nodes", steps)
        if reason is not None:
            return reason
        self.last_pasted = list(new_ids.values())
        self.select(self.last_pasted)
        return list(self.last_pasted)

    def duplicate(self, ids: Iterable[str]) -> list[str] | str:
        """Copies of the nodes (and their internal wires) just below-right of them."""
        ids = self.expand_ids(ids)
        if not ids:
            return self._refuse("select nodes to duplicate")
        text = self.copy(ids, to_clipboard=False)
        xs = [self._graph.nodes[i].position for i in ids]
        at = (min(p[0] for p in xs) + PASTE_OFFSET, min(p[1] for p in xs) + PASTE_OFFSET)
        return self.paste(text, at=at)


def _prefix(type_: str, old_id: str) -> str:
    spec = get_layer(type_)
    return spec.prefix if spec else old_id.rstrip("0123456789") or "node"


@functools.cache
def _release_clipboard_at_exit() -> None:
    """Empty the clipboard before Python tears Qt down.

    A QMimeData made in Python and handed to the clipboard is deleted twice when the
    application object goes away with it still there (a segfault at exit, seen with
    PySide6 6.11 and 6.12), so we take it back while the interpreter is still whole.
    """
    def release() -> None:
        if QGuiApplication.instance() is not None:
            board = QGuiApplication.clipboard()
            data = board.mimeData()
            if data is not None and data.hasFormat(GRAPH_MIME):
                board.clear()

    atexit.register(release)
