"""The backward graph, grouped by graph node: one block per node holding its autograd nodes.

Blocks are laid out in layers from the loss (top) towards the input (bottom), the way gradients
flow; an arrow goes from a block to each block its gradients flow into. A block shows its node id,
how many autograd nodes it holds and the bytes they save for backward; clicking its ▸ expands it
to list every autograd node (name, saved bytes). Hovering shows the saved tensors. Selecting a
block emits :attr:`BackwardView.node_selected` so the design canvas can select the same node, and
:meth:`BackwardView.select` follows the canvas the other way.
"""

from __future__ import annotations

import math

from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QPainter, QPainterPath, QPen, QPolygonF, QWheelEvent
from PySide6.QtWidgets import (
    QGraphicsItem,
    QGraphicsPathItem,
    QGraphicsScene,
    QGraphicsSceneMouseEvent,
    QGraphicsView,
    QStyleOptionGraphicsItem,
    QWidget,
)

from graph_editor.build.analysis import format_count
from graph_editor.build.autograd import LOSS, AutogradCapture, AutogradNode, OwnerSummary
from graph_editor.ui.style import DARK, Fonts, Theme

BLOCK_W, HEAD_H, ROW_H, GAP_X, GAP_Y = 240.0, 40.0, 16.0, 36.0, 46.0
TOGGLE = QRectF(BLOCK_W - 26, 8, 18, 18)


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class BlockItem(QGraphicsItem):
    """One graph node's part of the backward graph."""

    def __init__(self, summary: OwnerSummary, nodes: list[AutogradNode], theme: Theme, fonts: Fonts) -> None:
        super().__init__()
        self.node_id, self.summary, self.nodes = summary.owner, summary, nodes
        self.theme, self.fonts = theme, fonts
        self.expanded = False
        self.heat: QColor | None = None
        self.history: list[float] = []  # the node's sparkline: one figure over the run's inspections
        self.edges: list[EdgeItem] = []
        self.setFlags(QGraphicsItem.GraphicsItemFlag.ItemIsSelectable)
        self.setAcceptHoverEvents(True)
        self.setZValue(1)
        self.setToolTip(self._tooltip())

    @property
    def height(self) -> float:
        return HEAD_H + (len(self.nodes) * ROW_H + 6 if self.expanded else 0)

    def boundingRect(self) -> QRectF:
        return QRectF(-2, -2, BLOCK_W + 4, self.height + 4)

    def set_expanded(self, on: bool) -> None:
        if on != self.expanded:
            self.prepareGeometryChange()
            self.expanded = on
            scene = self.scene()
            if isinstance(scene, BackwardScene):
                scene.relayout()

    def mousePressEvent(self, event: QGraphicsSceneMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton and TOGGLE.adjusted(-4, -4, 4, 4).contains(event.pos()):
            self.set_expanded(not self.expanded)
            event.accept()
            return
        super().mousePressEvent(event)

    def _tooltip(self) -> str:
        s = self.summary
        lines = [f"<b>{_html(s.owner)}</b>: {s.nodes} autograd node(s), saves {format_count(s.saved_bytes, 'B')}"]
        if s.grads_to:
            lines.append(f"gradients flow to {_html(', '.join(s.grads_to))}")
        if s.params:
            lines.append(f"accumulates into {_html(', '.join(s.params))}")
        rows = []
        for n in self.nodes:
            for t in n.saved:
                bytes_ = format_count(t.bytes, "B") if not t.shared else "shared"
                shape = "x".join(str(d) for d in t.shape) or "scalar"
                rows.append(f"<tr><td>{_html(n.name)}</td><td>{_html(t.name)}</td><td>{shape}</td>"
                            f"<td>{t.dtype}</td><td align=right>{bytes_}</td></tr>")
        if rows:
            lines.append("<table cellspacing=4><tr><th align=left>node</th><th align=left>saved</th>"
                         "<th align=left>shape</th><th align=left>dtype</th><th align=right>bytes</th></tr>"
                         + "".join(rows[:40]) + "</table>")
            if len(rows) > 40:
                lines.append(f"... and {len(rows) - 40} more saved tensors")
        else:
            lines.append("saves nothing for backward")
        return "<br>".join(lines)

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget: QWidget | None = None) -> None:
        t, f = self.theme, self.fonts
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        rect = QRectF(0, 0, BLOCK_W, self.height)
        painter.setPen(QPen(t.selected if self.isSelected() else t.node_border, 2 if self.isSelected() else 1))
        painter.setBrush(t.node_body)
        painter.drawRoundedRect(rect, 6, 6)
        stripe = self.heat or (QColor("#b5838d") if self.node_id == LOSS else t.category_color("Core"))
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(stripe)
        painter.drawRoundedRect(QRectF(0, 0, 6, self.height), 3, 3)
        painter.setFont(f.title)
        painter.setPen(t.text)
        title_w = BLOCK_W - (104 if len(self.history) > 1 else 44)   # room for the sparkline
        painter.drawText(QRectF(14, 3, title_w, 18), Qt.AlignmentFlag.AlignVCenter,
                         painter.fontMetrics().elidedText(self.node_id, Qt.TextElideMode.ElideMiddle, int(title_w)))
        painter.setFont(f.small)
        painter.setPen(t.text_dim)
        s = self.summary
        painter.drawText(QRectF(14, 21, BLOCK_W - 44, 16), Qt.AlignmentFlag.AlignVCenter,
                         f"{s.nodes} node{'s' * (s.nodes != 1)} · {format_count(s.saved_bytes, 'B')} saved")
        self._paint_sparkline(painter)
        painter.setPen(QPen(t.text_dim, 1.4))
        painter.setBrush(Qt.BrushStyle.NoBrush)
        c = TOGGLE.center()
        arrow = ([QPointF(c.x() - 4, c.y() - 2), QPointF(c.x() + 4, c.y() - 2), QPointF(c.x(), c.y() + 3)]
                 if self.expanded else
                 [QPointF(c.x() - 2, c.y() - 4), QPointF(c.x() - 2, c.y() + 4), QPointF(c.x() + 3, c.y())])
        painter.setBrush(t.text_dim)
        painter.drawPolygon(QPolygonF(arrow))
        if not self.expanded:
            return
        painter.setFont(f.mono)
        y = HEAD_H
        painter.setPen(QPen(t.grid_major, 1))
        painter.drawLine(QPointF(8, y - 2), QPointF(BLOCK_W - 8, y - 2))
        for n in self.nodes:
            row = QRectF(14, y, BLOCK_W - 24, ROW_H)
            painter.setPen(t.text)
            label = n.name if not n.param else f"{n.name} → {n.param.split('.', 1)[-1]}"
            room = row.width() - (64 if n.saved_bytes else 0)
            painter.drawText(row, Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft,
                             painter.fontMetrics().elidedText(label, Qt.TextElideMode.ElideRight, int(room)))
            painter.setPen(t.shape_text)
            if n.saved_bytes:
                painter.drawText(row, Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight,
                                 format_count(n.saved_bytes, "B"))
            y += ROW_H


    def _paint_sparkline(self, painter: QPainter) -> None:
        """The history (log scale) in the header, left of the toggle; nothing until two inspections."""
        values = [math.log10(v) for v in self.history if v > 0 and math.isfinite(v)]
        if len(values) < 2:
            return
        box = QRectF(BLOCK_W - 92, 5, 58, 14)   # in the title row: the subtitle keeps its width
        lo, hi = min(values), max(values)
        span = hi - lo or 1.0
        step = box.width() / (len(values) - 1)
        points = [QPointF(box.left() + i * step, box.bottom() - (v - lo) / span * box.height())
                  for i, v in enumerate(values)]
        painter.setPen(QPen(self.theme.shape_text, 1.2))
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawPolyline(QPolygonF(points))


class EdgeItem(QGraphicsPathItem):
    """A gradient edge: from a block down (or across) to a block its gradients flow into."""

    def __init__(self, src: BlockItem, dst: BlockItem, theme: Theme) -> None:
        super().__init__()
        self.src, self.dst = src, dst
        self.setPen(QPen(theme.wire, 1.4))
        self.setZValue(0)
        self.head = QGraphicsPathItem(self)
        self.head.setBrush(theme.wire)
        self.head.setPen(Qt.PenStyle.NoPen)
        src.edges.append(self)
        dst.edges.append(self)

    def update_path(self) -> None:
        a = self.src.pos() + QPointF(BLOCK_W / 2, self.src.height)
        b = self.dst.pos() + QPointF(BLOCK_W / 2, 0)
        path = QPainterPath(a)
        dy = max(abs(b.y() - a.y()) / 2, 20)
        path.cubicTo(a + QPointF(0, dy), b - QPointF(0, dy), b)
        self.setPath(path)
        head = QPainterPath()
        head.addPolygon(QPolygonF([b, b + QPointF(-5, -9), b + QPointF(5, -9), b]))
        self.head.setPath(head)


class BackwardScene(QGraphicsScene):
    """Blocks and gradient edges of one capture."""

    def __init__(self, theme: Theme = DARK, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.theme, self.fonts = theme, Fonts()
        self.blocks: dict[str, BlockItem] = {}
        self.layers: list[list[str]] = []
        self.capture: AutogradCapture | None = None
        self.setBackgroundBrush(theme.background)

    def set_capture(self, capture: AutogradCapture) -> None:
        self.clear()
        self.blocks, self.capture = {}, capture
        by_owner = capture.by_owner()
        summaries = capture.summaries()
        for s in summaries:
            block = BlockItem(s, by_owner.get(s.owner, []), self.theme, self.fonts)
            self.addItem(block)
            self.blocks[s.owner] = block
        for s in summaries:
            for target in s.grads_to:
                if target in self.blocks:
                    self.addItem(EdgeItem(self.blocks[s.owner], self.blocks[target], self.theme))
        self.layers = _layers(summaries)
        self.relayout()

    def relayout(self) -> None:
        y = 0.0
        for layer in self.layers:
            width = len(layer) * BLOCK_W + (len(layer) - 1) * GAP_X
            x = -width / 2
            tallest = 0.0
            for owner in layer:
                block = self.blocks[owner]
                block.setPos(x, y)
                x += BLOCK_W + GAP_X
                tallest = max(tallest, block.height)
            y += tallest + GAP_Y
        for block in self.blocks.values():
            for edge in block.edges:
                edge.update_path()
        self.setSceneRect(self.itemsBoundingRect().adjusted(-40, -40, 40, 40))

    def set_theme(self, theme: Theme) -> None:
        """Repaint in ``theme`` (the canvas's dark or light colours)."""
        self.theme = theme
        self.setBackgroundBrush(theme.background)
        for block in self.blocks.values():
            block.theme = theme
            block.update()
            for edge in block.edges:
                edge.setPen(QPen(theme.wire, 1.4))
                edge.head.setBrush(theme.wire)

    def set_history(self, history: dict[str, list[float]]) -> None:
        """Each block's sparkline values (a block without any shows none)."""
        for owner, block in self.blocks.items():
            block.history = history.get(owner, [])
            block.update()

    def set_heat(self, colors: dict[str, QColor]) -> None:
        for owner, block in self.blocks.items():
            block.heat = colors.get(owner)
            block.update()


def _layers(summaries: list[OwnerSummary]) -> list[list[str]]:
    """Blocks by their longest distance from the loss along gradient edges (the loss's layer first)."""
    depth: dict[str, int] = {}
    order = [s.owner for s in reversed(summaries)]  # the loss first, then backwards through the network
    targets = {s.owner: s.grads_to for s in summaries}
    for owner in order:
        depth.setdefault(owner, 0)
        for t in targets[owner]:
            if t in targets:
                depth[t] = max(depth.get(t, 0), depth[owner] + 1)
    layers: dict[int, list[str]] = {}
    for owner in order:
        layers.setdefault(depth[owner], []).append(owner)
    return [layers[d] for d in sorted(layers)]


class BackwardView(QGraphicsView):
    """The backward graph of a capture; selection in and out by graph node id."""

    node_selected = Signal(str)

    def __init__(self, parent: QWidget | None = None, theme: Theme = DARK) -> None:
        super().__init__(parent)
        self.backward = BackwardScene(theme, self)
        self.setScene(self.backward)
        self.setRenderHints(QPainter.RenderHint.Antialiasing | QPainter.RenderHint.TextAntialiasing)
        self.setDragMode(QGraphicsView.DragMode.ScrollHandDrag)
        self.setMouseTracking(True)
        self._syncing = False
        self.backward.selectionChanged.connect(self._on_selection)

    def set_capture(self, capture: AutogradCapture) -> None:
        self.backward.set_capture(capture)
        self.resetTransform()
        top = self.backward.sceneRect()
        self.centerOn(QPointF(0, top.top() + self.viewport().height() / 2))

    def block(self, node_id: str) -> BlockItem | None:
        return self.backward.blocks.get(node_id)

    def select(self, node_id: str | None) -> None:
        """Select ``node_id``'s block (none for None or a node without one) and bring it into view."""
        self._syncing = True
        try:
            for owner, block in self.backward.blocks.items():
                block.setSelected(owner == node_id)
            if node_id in self.backward.blocks:
                self.ensureVisible(self.backward.blocks[node_id], 40, 40)
        finally:
            self._syncing = False

    def _on_selection(self) -> None:
        if self._syncing:
            return
        chosen = [i for i in self.backward.selectedItems() if isinstance(i, BlockItem)]
        if chosen:
            self.node_selected.emit(chosen[0].node_id)

    def wheelEvent(self, event: QWheelEvent) -> None:
        if event.modifiers() & Qt.KeyboardModifier.ControlModifier:
            factor = 1.15 if event.angleDelta().y() > 0 else 1 / 1.15
            self.scale(factor, factor)
            return
        super().wheelEvent(event)
