"""Groups on the canvas: a collapsed group is one block box; an expanded one a frame.

A collapsed group's box carries the group's external ports: one input per member port
wired from outside, one output per member that feeds the outside. Those ports stand for
the member's own ports, so wiring to a box wires to the node inside it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QPainter, QPainterPath, QPen
from PySide6.QtWidgets import QGraphicsItem, QStyleOptionGraphicsItem, QWidget

from ..model import Graph, Group
from .items import RADIUS, ROW_H, SIMPLE_LOD, TITLE_H, PortItem, lod_of

if TYPE_CHECKING:
    from .scene import GraphScene

BOX_W = 170.0
FRAME_MARGIN = 14.0
FRAME_HEADER = 22.0


def external_ports(graph: Graph, group: Group) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(inputs, outputs) of a group as member (node id, port) pairs, in wiring order."""
    inside = set(group.nodes)
    ins: dict[tuple[str, str], None] = {}
    outs: dict[tuple[str, str], None] = {}
    for e in graph.edges:
        if e.dst in inside and e.src not in inside:
            ins[(e.dst, e.dst_port)] = None
        if e.src in inside and e.dst not in inside:
            outs[(e.src, e.src_port)] = None
    return list(ins), list(outs)


class GroupBox(QGraphicsItem):
    """A collapsed group drawn as one named block with the group's external ports."""

    def __init__(self, graph: Graph, group: Group) -> None:
        super().__init__()
        self.group_id = group.id
        self.name = group.name
        self.count = len(group.nodes)
        self.shape_text = ""
        self.error = False
        self.setFlags(QGraphicsItem.GraphicsItemFlag.ItemIsSelectable
                      | QGraphicsItem.GraphicsItemFlag.ItemIsMovable
                      | QGraphicsItem.GraphicsItemFlag.ItemSendsGeometryChanges)
        self.setZValue(1)
        ins, outs = external_ports(graph, group)
        self.in_ports = {key: PortItem(self, key[0], key[1], True) for key in ins}
        self.out_ports = {key: PortItem(self, key[0], key[1], False) for key in outs}
        rows = max(len(ins), len(outs), 1)
        self.height = TITLE_H + ROW_H * (rows + 1) + 8
        for k, port in enumerate(self.in_ports.values()):
            port.setPos(0, TITLE_H + ROW_H * (k + 0.5) + 2)
        for k, port in enumerate(self.out_ports.values()):
            port.setPos(BOX_W, TITLE_H + ROW_H * (k + 0.5) + 2)
        members = [graph.nodes[n].position for n in group.nodes if n in graph.nodes]
        if members:
            self.setPos(min(p[0] for p in members), min(p[1] for p in members))
        self.setToolTip(f"<b>{group.name}</b>: a block of {self.count} layers<br>"
                        "double-click to expand it")

    def set_state(self, shape_text: str, error: bool, problems: list[str] | None = None) -> None:
        """Show the block's output shape, and its members' problems in red and in the tooltip."""
        if (shape_text, error) != (self.shape_text, self.error):
            self.shape_text, self.error = shape_text, error
            self.update()
        lines = [f"<b>{self.name}</b>: a block of {self.count} layers"]
        lines += [f"<span style='color:#e05555'>{p}</span>" for p in problems or []]
        self.setToolTip("<br>".join([*lines, "double-click to expand it"]))

    def boundingRect(self) -> QRectF:
        return QRectF(-10, -3, BOX_W + 20, self.height + 10)

    def itemChange(self, change: QGraphicsItem.GraphicsItemChange, value: Any) -> Any:
        if change == QGraphicsItem.GraphicsItemChange.ItemPositionHasChanged:
            for port in (*self.in_ports.values(), *self.out_ports.values()):
                for wire in port.wires:
                    wire.update_path()
        return super().itemChange(change, value)

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget: QWidget | None = None) -> None:
        scene: GraphScene = self.scene()
        theme, fonts, metrics = scene.theme, scene.fonts, scene.metrics
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        rect = QRectF(0, 0, BOX_W, self.height)
        border = theme.selected if self.isSelected() else theme.error if self.error else theme.group_border
        painter.setPen(QPen(theme.group_border, 1))
        painter.setBrush(theme.node_body)
        painter.drawRoundedRect(rect.translated(5, 5), RADIUS, RADIUS)  # a stack of layers behind
        painter.setBrush(theme.error_body if self.error else theme.node_body)
        painter.setPen(QPen(border, 2))
        painter.drawRoundedRect(rect, RADIUS, RADIUS)
        for port in (*self.in_ports.values(), *self.out_ports.values()):
            port.draw(painter, theme)
        if lod_of(painter) < SIMPLE_LOD:
            return
        painter.setFont(fonts.title)
        painter.setPen(theme.text)
        pad = 10.0
        painter.drawText(QRectF(pad, 0, BOX_W - 2 * pad, TITLE_H), Qt.AlignmentFlag.AlignVCenter,
                         metrics.title.elidedText("▣ " + self.name, Qt.TextElideMode.ElideRight, BOX_W - 2 * pad))
        painter.setPen(QPen(theme.group_border, 1))
        painter.drawLine(QPointF(4, TITLE_H), QPointF(BOX_W - 4, TITLE_H))
        painter.setFont(fonts.small)
        painter.setPen(theme.text_dim)
        bottom = QRectF(pad, self.height - ROW_H - 6, BOX_W - 2 * pad, ROW_H)
        painter.drawText(bottom, Qt.AlignmentFlag.AlignVCenter, f"{self.count} layers")
        if self.shape_text:
            painter.setFont(fonts.mono)
            painter.setPen(theme.error if self.error else theme.shape_text)
            painter.drawText(bottom, Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight,
                             f"→ {self.shape_text}")


class GroupFrame(QGraphicsItem):
    """An expanded group: a labelled frame behind its member nodes."""

    def __init__(self, group: Group) -> None:
        super().__init__()
        self.group_id = group.id
        self.name = group.name
        self.rect = QRectF()
        self.parts: list[QRectF] = []
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemIsSelectable)
        self.setZValue(-2)
        self.setToolTip(f"<b>{group.name}</b><br>double-click the title to collapse it into a block")

    def fit(self, member_rects: list[QRectF]) -> None:
        """Wrap the members' scene rectangles: one box per row of members, so a group that a
        long layout cut across bands does not frame the nodes between its rows."""
        rows: list[QRectF] = []
        for r in sorted(member_rects, key=lambda r: r.top()):
            if rows and r.top() <= rows[-1].bottom() + FRAME_HEADER + 2 * FRAME_MARGIN:
                rows[-1] = rows[-1].united(r)
            else:
                rows.append(QRectF(r))
        parts = [r.adjusted(-FRAME_MARGIN, -FRAME_MARGIN - FRAME_HEADER, FRAME_MARGIN, FRAME_MARGIN) for r in rows]
        rect = QRectF()
        for p in parts:
            rect = rect.united(p)
        if parts != self.parts:
            self.prepareGeometryChange()
            self.parts, self.rect = parts, rect

    def header_rect(self) -> QRectF:
        first = self.parts[0] if self.parts else self.rect
        return QRectF(first.left(), first.top(), first.width(), FRAME_HEADER)

    def shape(self) -> QPainterPath:
        path = QPainterPath()
        for p in self.parts:
            path.addRoundedRect(p, 8, 8)
        return path

    def boundingRect(self) -> QRectF:
        return self.rect.adjusted(-2, -2, 2, 2)

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget: QWidget | None = None) -> None:
        scene: GraphScene = self.scene()
        theme, fonts = scene.theme, scene.fonts
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        pen = QPen(theme.selected if self.isSelected() else theme.group_border, 1.5, Qt.PenStyle.DashLine)
        painter.setPen(pen)
        painter.setBrush(theme.group_fill)
        for part in self.parts:
            painter.drawRoundedRect(part, 8, 8)
        if lod_of(painter) >= SIMPLE_LOD:
            painter.setFont(fonts.group)
            painter.setPen(theme.text_dim)
            painter.drawText(self.header_rect().adjusted(10, 2, -10, 0), Qt.AlignmentFlag.AlignVCenter,
                             f"▾ {self.name}")
