"""The backward graph, drawn by the design canvas's own machinery: one block per graph node.

:func:`graph_editor.autograd.canvas_graph.backward_graph` turns a capture into a graph whose nodes
are autograd nodes and whose collapsed groups are the graph nodes that made them. This module draws
it with the canvas's :class:`~graph_editor.ui.canvas.GraphCanvas` (not editable: it selects, pans,
zooms and opens blocks, and edits nothing), its scene, wires, routing, blocks and frames; only what
a node and a block *say* differs, through the scene's item seams:

- a block (:class:`BackwardBox`) shows its graph node's id and layer, how many autograd nodes it
  holds, the bytes they save for backward, and, once a run was inspected, the figure chosen in the
  heat list with its history as a sparkline; a heat bar across its top; the gradient shapes it takes
  in and hands on (``dL/dy → dL/dx``). Double-click opens it in place, like a block of the design;
- an autograd node (:class:`AutogradItem`) shows its name, the parameter it accumulates into or what
  it saved; hovering a node or a block lists the saved tensors (name, shape, dtype, bytes);
- wires carry gradients from the loss towards the input, labelled with the gradient's shape.

Selecting a block (or a node in an open one) emits :attr:`BackwardView.node_selected` with the graph
node's id so the design canvas selects it; :meth:`BackwardView.select` follows the design canvas.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from PySide6.QtCore import QObject, QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QPainter, QPainterPath, QPen, QPolygonF, QUndoStack
from PySide6.QtWidgets import QStyleOptionGraphicsItem, QWidget

from graph_editor.autograd.canvas_graph import backward_graph
from graph_editor.autograd.capture import LOSS, AutogradCapture, AutogradNode, OwnerSummary, SavedTensor
from graph_editor.model import Graph, Group, Node, fmt_shape, validate
from graph_editor.model.geometry import BOX_W, NODE_W, ROW_H, SHAPE_H, TITLE_H
from graph_editor.model.hierarchy import ancestors
from graph_editor.model.units import nbytes
from graph_editor.ui.canvas import GraphCanvas
from graph_editor.ui.controller import EditorController
from graph_editor.ui.groups import GroupBox, GroupFrame
from graph_editor.ui.items import NodeItem, PortItem
from graph_editor.ui.look import SceneLook
from graph_editor.ui.scene import GraphScene
from graph_editor.ui.style import DARK, Theme

from .heat import Metric, Scale, color_at

LOSS_COLOUR = QColor("#b5838d")
MAX_ROWS = 40  # saved tensors listed in a tooltip


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _saved_table(rows: list[tuple[str, SavedTensor]]) -> str:
    """An HTML table of saved tensors: (node name, tensor) rows, the first MAX_ROWS of them."""
    if not rows:
        return "saves nothing for backward"
    cells = []
    for node, t in rows[:MAX_ROWS]:
        shape = "x".join(str(d) for d in t.shape) or "scalar"
        size = "shared" if t.shared else nbytes(t.bytes)
        cells.append(f"<tr><td>{_html(node)}</td><td>{_html(t.name)}</td><td>{shape}</td><td>{t.dtype}</td>"
                     f"<td align=right>{size}</td></tr>")
    more = f"<br>... and {len(rows) - MAX_ROWS} more saved tensors" if len(rows) > MAX_ROWS else ""
    return ("<table cellspacing=4><tr><th align=left>node</th><th align=left>saved</th><th align=left>shape</th>"
            "<th align=left>dtype</th><th align=right>bytes</th></tr>" + "".join(cells) + "</table>" + more)


class AutogradItem(NodeItem):
    """One autograd node: its name in the title bar (the owner's layer colour), under it the parameter
    it accumulates into or the tensors it saved, and their bytes."""

    def __init__(self, node: Node, grad: AutogradNode, category: str) -> None:
        self.grad = grad
        super().__init__(node)
        self.category = category
        self.subtitle = (f"→ {node.label or grad.param}" if grad.param else
                         ", ".join(dict.fromkeys(t.name for t in grad.saved)) or "saves nothing")
        self.shape_text = (nbytes(grad.saved_bytes) + " saved" if grad.saved_bytes else
                           "0 B (shared)" if grad.saved else "")
        self._update_tooltip()

    def _make_ports(self, node: Node) -> None:
        # Gradients arrive (summed) on the left and leave for each input on the right.
        self.in_ports["in"] = PortItem(self, node.id, "in", True, variadic=True)
        self.out_ports["out"] = PortItem(self, node.id, "out", False)

    def _tooltip_text(self) -> str:
        grad = self.grad
        head = f"<b>{_html(grad.name)}</b> of {_html(grad.owner)}"
        if grad.param:
            head += f"<br>accumulates the gradient of {_html(grad.param)}"
        return head + "<br>" + _saved_table([(grad.name, t) for t in grad.saved])

    def _paint_text(self, painter: QPainter, scene: SceneLook) -> None:
        theme, fonts, metrics = scene.theme, scene.fonts, scene.metrics
        pad, inner = 10.0, NODE_W - 20.0
        painter.setFont(fonts.title)
        painter.setPen(theme.title_text)
        painter.drawText(QRectF(pad, 0, inner, TITLE_H), Qt.AlignmentFlag.AlignVCenter,
                         metrics.elide("title", self.title, Qt.TextElideMode.ElideRight, inner))
        painter.setFont(fonts.small)
        painter.setPen(theme.text_dim)
        painter.drawText(QRectF(pad, TITLE_H, inner, ROW_H), Qt.AlignmentFlag.AlignVCenter,
                         metrics.elide("small", self.subtitle, Qt.TextElideMode.ElideMiddle, inner))
        y = TITLE_H + ROW_H
        painter.setPen(QPen(theme.grid_major, 1))
        painter.drawLine(QPointF(6, y + 2), QPointF(NODE_W - 6, y + 2))
        painter.setFont(fonts.mono)
        painter.setPen(theme.shape_text if self.shape_text else theme.text_dim)
        painter.drawText(QRectF(pad, y + 3, inner, SHAPE_H), Qt.AlignmentFlag.AlignVCenter,
                         self.shape_text or "0 B saved")


class BackwardBox(GroupBox):
    """A graph node's part of the backward graph, closed: its autograd nodes as one block."""

    def __init__(self, graph: Graph, group: Group, summary: OwnerSummary, nodes: list[AutogradNode]) -> None:
        self.summary, self.grads = summary, nodes
        super().__init__(graph, group)
        self._update_tooltip()

    @property
    def node_id(self) -> str:
        """The graph node this block stands for."""
        return self.group_id

    def count_text(self) -> str:
        return f"{self.count} node{'s' * (self.count != 1)}"

    def stat_rows(self) -> list[tuple[str, str]]:
        scene = self.scene()
        label, values = scene.figure_of(self.group_id) if isinstance(scene, BackwardScene) else ("", [])
        shown = scene.format_figure(values[-1]) if values and isinstance(scene, BackwardScene) else ""
        figure = (label, shown) if values else ("params", str(len(self.summary.params)))
        return [("saved", nbytes(self.summary.saved_bytes)), figure]

    def _update_tooltip(self) -> None:
        s = getattr(self, "summary", None)
        if s is None:  # called by GroupBox.__init__ before this block knows its summary
            return
        kind = f" ({_html(self.kind)})" if self.kind else ""
        lines = [f"<b>{_html(s.owner)}</b>{kind}: {s.nodes} autograd node{'s' * (s.nodes != 1)}, "
                 f"saves {nbytes(s.saved_bytes)}"]
        if s.grads_to:
            lines.append(f"gradients flow to {_html(', '.join(s.grads_to))}")
        if s.params:
            lines.append(f"accumulates into {_html(', '.join(s.params))}")
        lines.append(_saved_table([(n.name, t) for n in self.grads for t in n.saved]))
        lines.append("double-click to open it")
        self.setToolTip("<br>".join(lines))

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget: QWidget | None = None) -> None:
        super().paint(painter, option, widget)
        scene = self.scene()
        if not isinstance(scene, BackwardScene):
            return
        heat = scene.heat.get(self.group_id) or (LOSS_COLOUR if self.group_id == LOSS else None)
        if heat is not None:  # a bar across the top of the block, inside its rounded corners
            bar = QPainterPath()
            bar.addRoundedRect(QRectF(1, 1, BOX_W - 2, 8), 4, 4)
            painter.fillPath(bar.intersected(_top_half(BOX_W)), heat)
        _, values = scene.figure_of(self.group_id)
        if len(values) > 1:
            self._paint_sparkline(painter, scene.theme, values)

    def _paint_sparkline(self, painter: QPainter, theme: Theme, values: list[float]) -> None:
        """The figure's history (log scale) between its name and its value in the second stat row."""
        logs = [math.log10(v) for v in values if v > 0 and math.isfinite(v)]
        if len(logs) < 2:
            return
        box = QRectF(58, TITLE_H + 2 * ROW_H + 3, BOX_W - 58 - 72, ROW_H - 6)
        lo, hi = min(logs), max(logs)
        span = hi - lo or 1.0
        step = box.width() / (len(logs) - 1)
        points = [QPointF(box.left() + i * step, box.bottom() - (v - lo) / span * box.height())
                  for i, v in enumerate(logs)]
        painter.setPen(QPen(theme.shape_text, 1.2))
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawPolyline(QPolygonF(points))


def _top_half(width: float) -> QPainterPath:
    path = QPainterPath()
    path.addRect(QRectF(0, 0, width, 5))
    return path


class BackwardScene(GraphScene):
    """The canvas's scene, with autograd items and blocks; the capture it shows sets their contents."""

    LAZY_FROM = None   # its items are autograd nodes, sized by the capture: all made at once

    def __init__(self, graph: Graph, theme: Theme = DARK, parent: QObject | None = None) -> None:
        self.capture: AutogradCapture | None = None
        self.forward: Graph | None = None
        self.summaries: dict[str, OwnerSummary] = {}
        self.by_owner: dict[str, list[AutogradNode]] = {}
        self.shapes: dict[str, str] = {}  # graph node -> its output's shape (= the shape of dL/dy)
        self.heat: dict[str, QColor] = {}
        self.history: dict[str, list[float]] = {}
        self.figure = ""  # the name of the figure in ``history``
        self.format_figure: Callable[[float], str] = lambda v: f"{v:.3g}"   # with its unit (ms, %)
        super().__init__(graph, theme, parent)

    def show_capture(self, capture: AutogradCapture, forward: Graph | None) -> None:
        """Remember what the items of the next graph stand for (call before the graph is shown)."""
        self.capture, self.forward = capture, forward
        self.summaries = {s.owner: s for s in capture.summaries()}
        self.by_owner = capture.by_owner()
        self.shapes = {}
        if forward is not None:
            self.shapes = {k: fmt_shape(v) for k, v in validate(forward, capture.batch).shapes.items()}

    @property
    def blocks(self) -> dict[str, GroupBox | GroupFrame]:
        """Each graph node's block: its box when closed, its frame when open."""
        return {**self.boxes, **self.frames}

    def figure_of(self, owner: str) -> tuple[str, list[float]]:
        return self.figure, self.history.get(owner, [])

    def make_node_item(self, node: Node) -> NodeItem:
        if self.capture is None:
            return super().make_node_item(node)
        grad = self.capture.nodes[node.params["autograd"]]
        forward = self.forward.nodes.get(grad.owner) if self.forward is not None else None
        spec = forward.spec if forward is not None else None
        return AutogradItem(node, grad, spec.category if spec is not None else "")

    def summary(self, group: Group) -> OwnerSummary:
        """The summary of a graph node's block, or of a design block's (over the graph nodes inside)."""
        if group.id in self.summaries:
            return self.summaries[group.id]
        assert self.capture is not None
        inside = {self.graph.nodes[n].params["owner"] for n in group.nodes}
        parts = [self.summaries[o] for o in self.summaries if o in inside]
        names: dict[str, int] = {}
        for p in parts:
            for k, v in p.names.items():
                names[k] = names.get(k, 0) + v
        to = dict.fromkeys(t for p in parts for t in p.grads_to if t not in inside)
        return OwnerSummary(group.id, sum(p.nodes for p in parts), names, sum(p.saved_bytes for p in parts),
                            tuple(q for p in parts for q in p.params), tuple(to))

    def make_box(self, group: Group) -> GroupBox:
        if self.capture is None:
            return super().make_box(group)
        s = self.summary(group)
        grads = [self.capture.nodes[self.graph.nodes[n].params["autograd"]] for n in group.nodes]
        box = BackwardBox(self.graph, group, s, grads)
        gives = [self.shapes[t] for t in s.grads_to if t in self.shapes]
        takes = self.shapes.get(self._last(group), "") if group.id != LOSS else ""
        box.set_state(", ".join(dict.fromkeys(gives)) or ("params" if s.params else "nothing"), False, [], takes)
        return box

    def _last(self, group: Group) -> str:
        """The graph node whose output a block hands on: its own, or the last (in network order) inside
        a design block."""
        if group.id in self.summaries:
            return group.id
        inside = {self.graph.nodes[n].params["owner"] for n in group.nodes}
        return next((o for o in reversed(self.capture.owners) if o in inside), "") if self.capture else ""

    def label_wires(self) -> None:
        """Each wire between two graph nodes' autograd nodes carries dL/dy of the receiving node:
        the shape of that node's output."""
        nodes = self.graph.nodes
        done: set[tuple[int, int]] = set()
        for edge, wire in self.wires.items():
            a, b = nodes[edge.src].params["owner"], nodes[edge.dst].params["owner"]
            # Parallel wires between two items (a gradient summed from two uses) carry one label.
            pair = (id(wire.src.parentItem()), id(wire.dst.parentItem()))
            shown = a != b and wire.isVisible() and pair not in done
            wire.set_label(self.shapes.get(b, "") if shown else "")
            if shown:
                done.add(pair)

    def _on_groups_changed(self) -> None:
        super()._on_groups_changed()
        if self.capture is not None:
            self.label_wires()

    def set_heat(self, colours: dict[str, QColor]) -> None:
        self.heat = dict(colours)
        for box in self.boxes.values():
            box.update()

    def set_history(self, history: dict[str, list[float]], figure: str = "",
                    fmt: Callable[[float], str] | None = None) -> None:
        """Each block's ``figure`` over the run; the block shows its last value written by ``fmt``."""
        self.history, self.figure = dict(history), figure
        self.format_figure = fmt or (lambda v: f"{v:.3g}")
        for box in self.boxes.values():
            box.update()


class BackwardView(GraphCanvas):
    """The backward graph of a capture, on a canvas that edits nothing; selection in and out by graph
    node id."""

    node_selected = Signal(str)

    def __init__(self, parent: QWidget | None = None, theme: Theme = DARK) -> None:
        controller = EditorController(Graph(), QUndoStack())
        super().__init__(controller, None, parent, theme, editable=False, scene=BackwardScene)
        controller.setParent(self)
        controller.undo_stack.setParent(self)
        self.capture: AutogradCapture | None = None
        self._following = False
        controller.selection_changed.connect(self._on_selection)

    @property
    def backward(self) -> BackwardScene:
        scene = self.graph_scene
        assert isinstance(scene, BackwardScene)
        return scene

    def set_capture(self, capture: AutogradCapture, forward: Graph | None = None) -> None:
        """Show ``capture`` (of ``forward``, whose layers name the blocks and whose shapes label the
        wires), every block closed, the loss's end in view."""
        self.capture = capture
        self.backward.show_capture(capture, forward)
        self.controller.set_graph(backward_graph(capture, forward))

    def clear(self) -> None:
        """Show nothing (another graph was opened: this capture is not of it)."""
        self.capture = None
        self.backward.set_heat({})
        self.backward.set_history({})
        self.controller.set_graph(Graph())

    def block(self, node_id: str) -> GroupBox | GroupFrame | None:
        return self.backward.blocks.get(node_id)

    def select(self, node_id: str | None) -> None:
        """Select ``node_id``'s block (none for None or a node without one) and bring it into view."""
        groups = self.controller.graph.groups
        shown = node_id
        if node_id in groups:  # inside a closed design block: that block
            shown = next((g for g in reversed(ancestors(groups, node_id)) if groups[g].collapsed), node_id)
        self._following = True
        try:
            self.controller.select([shown] if shown in groups else [])
        finally:
            self._following = False
        if shown in groups:
            self.show_group(shown)

    def show_heat(self, metric: Metric | None, values: dict[str, float]) -> None:
        """Colour each block by ``metric``: a graph node's block by its value, a design block's by its
        members' values combined as the design canvas's overlay does; None clears the colours."""
        if metric is None:
            self.backward.set_heat({})
            return
        scale = Scale(metric, values)
        combiners: dict[str, Callable[[list[float]], float]] = {
            "sum": sum, "max": max, "mean": lambda vs: sum(vs) / len(vs)}
        combine = combiners[metric.combine]
        nodes = self.controller.graph.nodes
        colours = {}
        for gid, group in self.controller.graph.groups.items():
            inside = [values[o] for o in dict.fromkeys(nodes[n].params["owner"] for n in group.nodes) if o in values]
            if inside:
                colours[gid] = color_at(scale(float(combine(inside))))
        self.backward.set_heat(colours)

    def selected_node(self) -> str | None:
        """The graph node whose block (or one of whose autograd nodes) is selected first."""
        ids = self.controller.selection
        return self._owner(ids[0]) if ids else None

    def _owner(self, item_id: str) -> str | None:
        graph = self.controller.graph
        return item_id if item_id in graph.groups else graph.nodes[item_id].params.get("owner")

    def _on_selection(self, ids: list[str]) -> None:
        if self._following or not ids:
            return
        owner = self._owner(ids[0])
        if owner is not None:
            self.node_selected.emit(owner)

    def show_group(self, gid: str) -> None:
        """Bring ``gid``'s block into view at a readable zoom (the design canvas only moves there)."""
        item = self.block(gid)
        if item is None:
            return
        rect = item.rect if isinstance(item, GroupFrame) else item.sceneBoundingRect()
        if self.zoom < 0.6:
            self.zoom_at(0.8 / self.zoom, QPointF(self.viewport().rect().center()))
        if not self.visible_rect().contains(rect):
            self.centerOn(rect.center())
        self.minimap.refresh()
