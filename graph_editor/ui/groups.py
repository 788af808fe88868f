"""Groups on the canvas: a collapsed group is one block box; an expanded one a frame.

A collapsed group's box carries the group's external ports: one input per outside tensor
that enters it (every member port it feeds is wired through that one port), one output per
member that feeds the outside. It shows what the group is (its kind, or how many layers),
its parameters and FLOPs (the sums over its members) and its output shape. Groups nest
(:mod:`graph_editor.model.hierarchy`): an open group's frame holds the blocks and frames of
the groups inside it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QFont, QFontMetricsF, QPainter, QPainterPath, QPen
from PySide6.QtWidgets import QGraphicsItem, QStyleOptionGraphicsItem, QWidget

from ..model import Graph, Group
from ..model.block_layout import FRAME_HEADER, FRAME_MARGIN
from ..model.geometry import BOX_W, PORT_Y, ROW_H, SHAPE_H, TITLE_H, box_height
from ..model.hierarchy import external_ports
from ..model.units import count
from .items import RADIUS, SIMPLE_LOD, NodeItem, PortItem, lod_of

if TYPE_CHECKING:
    from .look import SceneLook

__all__ = ["BOX_W", "FRAME_HEADER", "FRAME_MARGIN", "GroupBox", "GroupFrame"]

FAR_LOD = 0.08  # below this zoom a block is a plain box
LABEL_MIN_PX = 7.0  # the smallest far-zoom block label, in screen pixels


class GroupBox(QGraphicsItem):
    """A collapsed group drawn as one named block with the group's external ports."""

    def __init__(self, graph: Graph, group: Group) -> None:
        super().__init__()
        self.group_id = group.id
        self.name = group.name
        self.kind = group.kind
        self.members = list(group.nodes)
        self.count = len(group.nodes)
        self.shape_text = ""  # what comes out
        self.in_text = ""  # what goes in
        self.error = False
        self.params: int | None = None
        self.flops: int | None = None
        self.problems: list[str] = []
        self.setFlags(QGraphicsItem.GraphicsItemFlag.ItemIsSelectable
                      | QGraphicsItem.GraphicsItemFlag.ItemIsMovable
                      | QGraphicsItem.GraphicsItemFlag.ItemSendsGeometryChanges)
        self.setZValue(1)
        ports = external_ports(graph, group.nodes)
        # Keys are the member ports each box port stands for; an input shared by several
        # members (a block's main path and its shortcut) is one port item under several keys.
        self.in_ports: dict[tuple[str, str], PortItem] = {}
        self.out_ports: dict[tuple[str, str], PortItem] = {}
        self.sources = list(ports.inputs)  # outside (node, port) of each input, in order
        for k, ((src, src_port), members) in enumerate(ports.inputs.items()):
            port = PortItem(self, members[0][0], members[0][1], True)
            port.setPos(0, PORT_Y + k * ROW_H)
            port.setToolTip(f"input from {src}.{src_port}, into " + ", ".join(f"{n}.{p}" for n, p in members))
            for key in members:
                self.in_ports[key] = port
        for k, key in enumerate(ports.outputs):
            port = PortItem(self, key[0], key[1], False)
            port.setPos(BOX_W, PORT_Y + k * ROW_H)
            port.setToolTip(f"output of {key[0]}.{key[1]}")
            self.out_ports[key] = port
        self.height = box_height(ports.count)
        members = [graph.nodes[n].position for n in group.nodes if n in graph.nodes]
        if members:
            self.setPos(min(p[0] for p in members), min(p[1] for p in members))
        self._update_tooltip()

    def ports(self) -> list[PortItem]:
        """Every port item once (an input may stand for several member ports)."""
        return list(dict.fromkeys((*self.in_ports.values(), *self.out_ports.values())))

    def set_state(self, shape_text: str, error: bool, problems: list[str] | None = None, in_text: str = "") -> None:
        """Show the block's input and output shapes, and its members' problems in red and in the tooltip."""
        if (shape_text, error, in_text) != (self.shape_text, self.error, self.in_text):
            self.shape_text, self.error, self.in_text = shape_text, error, in_text
            self.update()
        self.problems = list(problems or [])
        self._update_tooltip()

    def set_stats(self, params: int | None, flops: int | None) -> None:
        """Show the parameters and FLOPs of the whole block (sums over its members)."""
        if (params, flops) != (self.params, self.flops):
            self.params, self.flops = params, flops
            self._update_tooltip()
            self.update()

    def count_text(self) -> str:
        return f"{self.count} layers"

    def subtitle(self) -> str:
        return self.kind or self.count_text()

    def stat_rows(self) -> list[tuple[str, str]]:
        return [("params", "…" if self.params is None else count(self.params)),
                ("FLOPs", "…" if self.flops is None else count(self.flops))]

    def _update_tooltip(self) -> None:
        head = f"<b>{self.name}</b>" + (f" ({self.kind})" if self.kind else "") + f": a block of {self.count} layers"
        stats = [f"{k} {v}" for k, v in self.stat_rows() if v != "…"]
        lines = [head, *([", ".join(stats)] if stats else []),
                 *([f"input {self.in_text}"] if self.in_text else []),
                 *([f"output {self.shape_text}"] if self.shape_text else [])]
        lines += [f"<span style='color:#e05555'>{p}</span>" for p in self.problems]
        self.setToolTip("<br>".join([*lines, "double-click to open it"]))

    def boundingRect(self) -> QRectF:
        return QRectF(-10, -3, BOX_W + 20, self.height + 10)

    def shape(self) -> QPainterPath:
        path = QPainterPath()
        path.addRoundedRect(QRectF(0, 0, BOX_W, self.height), RADIUS, RADIUS)
        return path

    def itemChange(self, change: QGraphicsItem.GraphicsItemChange, value: Any) -> Any:
        if change == QGraphicsItem.GraphicsItemChange.ItemPositionHasChanged:
            for port in self.ports():
                for wire in port.wires:
                    wire.update_path()
        return super().itemChange(change, value)

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget: QWidget | None = None) -> None:
        scene: SceneLook = self.scene()
        theme = scene.theme
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        rect = QRectF(0, 0, BOX_W, self.height)
        border = theme.selected if self.isSelected() else theme.error if self.error else theme.group_border
        painter.setPen(QPen(theme.group_border, 1))
        painter.setBrush(theme.node_body)
        painter.drawRoundedRect(rect.translated(5, 5), RADIUS, RADIUS)  # a stack of layers behind
        painter.setBrush(theme.error_body if self.error else theme.node_body)
        painter.setPen(QPen(border, 2))
        painter.drawRoundedRect(rect, RADIUS, RADIUS)
        painter.fillRect(QRectF(1, 1, BOX_W - 2, TITLE_H - 1), theme.group_fill)
        for port in self.ports():
            port.draw(painter, theme)
        lod = lod_of(painter)
        if lod >= SIMPLE_LOD:
            self._paint_text(painter, scene)
        elif lod >= FAR_LOD:  # zoomed far out: the name alone, large enough to read, like a map label
            font, text = far_label(self.name, scene.fonts.title, BOX_W - 8, self.height, lod)
            painter.setFont(font)
            painter.setPen(theme.text)
            painter.drawText(QRectF(4, 0, BOX_W - 8, self.height), Qt.AlignmentFlag.AlignCenter, text)

    def _paint_text(self, painter: QPainter, scene: SceneLook) -> None:
        theme, fonts, metrics = scene.theme, scene.fonts, scene.metrics
        pad = 10.0
        inner = BOX_W - 2 * pad
        painter.setFont(fonts.title)
        painter.setPen(theme.text)
        painter.drawText(QRectF(pad, 0, inner, TITLE_H), Qt.AlignmentFlag.AlignVCenter,
                         metrics.elide("title", "▣ " + self.name, Qt.TextElideMode.ElideRight, inner))
        painter.setPen(QPen(theme.group_border, 1))
        painter.drawLine(QPointF(4, TITLE_H), QPointF(BOX_W - 4, TITLE_H))
        y = TITLE_H
        painter.setFont(fonts.small)
        painter.setPen(theme.text_dim)
        count = self.count_text()
        row = QRectF(pad, y, inner, ROW_H)
        # The layer count beside the kind when both fit (else the kind alone: the tooltip has the count).
        both = bool(self.kind) and metrics.advance("small", self.kind) + metrics.advance("small", count) + 8 <= inner
        if both:
            painter.drawText(row, Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight, count)
        width = inner - (metrics.advance("small", count) + 8 if both else 0)
        painter.drawText(QRectF(pad, y, width, ROW_H), Qt.AlignmentFlag.AlignVCenter,
                         metrics.elide("small", self.subtitle(), Qt.TextElideMode.ElideRight, width))
        y += ROW_H
        painter.setFont(fonts.body)
        for name, value in self.stat_rows():
            row = QRectF(pad, y, inner, ROW_H)
            painter.setPen(theme.text_dim)
            painter.drawText(row, Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft, name)
            painter.setPen(theme.text)
            painter.drawText(row, Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight, value)
            y += ROW_H
        y = self.height - SHAPE_H - 4
        painter.setPen(QPen(theme.grid_major, 1))
        painter.drawLine(QPointF(6, y + 2), QPointF(BOX_W - 6, y + 2))
        painter.setFont(fonts.mono)
        painter.setPen(theme.error if self.error else theme.shape_text)
        text = f"{self.in_text} → {self.shape_text or '?'}" if self.in_text else f"→ {self.shape_text or '?'}"
        painter.drawText(QRectF(pad, y + 3, inner, SHAPE_H), Qt.AlignmentFlag.AlignVCenter,
                         metrics.elide("mono", text, Qt.TextElideMode.ElideRight, inner))


def far_label(name: str, base: QFont, width: float, height: float, lod: float) -> tuple[QFont, str]:
    """A block's name as a map label in a ``width`` x ``height`` box seen at zoom ``lod``: whole on one
    line, as large as fits (at most 12 px on screen); else on two lines split after its last '.', '_'
    or '-' ("features." / "17"); else elided in the middle, which keeps the part that tells blocks apart
    (blocks named features.1 ... features.17 all read "featur..." cut at the end)."""
    largest, smallest = min(height * 0.45, 12.0 / lod), min(height * 0.45, LABEL_MIN_PX / lod)
    probe = QFont(base)
    probe.setPixelSize(100)
    metrics = QFontMetricsF(probe)

    def fitting(lines: list[str]) -> float:
        widest = max(metrics.horizontalAdvance(line) for line in lines)
        return min(largest, 100.0 * width / max(widest, 1e-6), height / (1.3 * len(lines)))

    cut = max(name.rfind(c) for c in "._-")
    for lines in ([name], [name[:cut + 1], name[cut + 1:]] if 0 < cut < len(name) - 1 else None):
        if lines is not None and (px := fitting(lines)) >= smallest:
            font = QFont(base)
            font.setPixelSize(max(1, int(px)))
            return font, "\n".join(lines)
    font = QFont(base)
    font.setPixelSize(max(1, round(smallest)))
    return font, QFontMetricsF(font).elidedText(name, Qt.TextElideMode.ElideMiddle, width)


class GroupFrame(QGraphicsItem):
    """An expanded group: a labelled frame behind its member nodes (and inner groups)."""

    def __init__(self, group: Group, depth: int = 0) -> None:
        super().__init__()
        self.group_id = group.id
        self.name = group.name
        self.kind = group.kind
        self.depth = depth
        self.rect = QRectF()
        self.parts: list[QRectF] = []
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemIsSelectable)
        self.setZValue(-3 + min(depth, 20) * 0.05)  # inner frames over outer ones, all behind wires
        self.setToolTip(f"<b>{group.name}</b>" + (f" ({group.kind})" if group.kind else "")
                        + "<br>double-click the title to close it into a block")

    def fit(self, member_rects: list[QRectF], whole: bool = False) -> None:
        """Wrap the members' scene rectangles: in one box when ``whole`` (nothing else lies
        among them), else one box per row of members, so a group that a long layout cut
        across bands does not frame the nodes between its rows."""
        rows: list[QRectF] = []
        for r in sorted(member_rects, key=lambda r: r.top()):
            if rows and (whole or r.top() <= rows[-1].bottom() + FRAME_HEADER + 2 * FRAME_MARGIN):
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
        scene: SceneLook = self.scene()
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
            kind = f"  ·  {self.kind}" if self.kind else ""
            painter.drawText(self.header_rect().adjusted(10, 2, -10, 0), Qt.AlignmentFlag.AlignVCenter,
                             f"▾ {self.name}{kind}")


def release(item: NodeItem | GroupBox) -> None:
    """Cut the cycles between ``item``, its ports and their wires (it is leaving the scene)."""
    for port in (*item.in_ports.values(), *item.out_ports.values()):
        port.wires.clear()
    item.in_ports.clear()
    item.out_ports.clear()
