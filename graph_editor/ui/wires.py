"""Wires: cubic curves from an output port to an input port, labelled with their shape.

A wire caches its path and label geometry and recomputes them only when an end moves.
Its label (the tensor shape the wire carries) sits at the middle of the curve. Zoomed out,
the label grows (up to LABEL_GROW times) so it stays readable on screen; it shows whenever
the wire is long enough on screen to hold it, and otherwise while the wire is hovered.
A wire that jumps over nodes in the same row arcs above them, so skip connections show.
"""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QPainter, QPainterPath, QPainterPathStroker, QPen
from PySide6.QtWidgets import (
    QGraphicsItem,
    QGraphicsPathItem,
    QGraphicsSceneHoverEvent,
    QStyleOptionGraphicsItem,
    QWidget,
)

from ..model import Edge
from .items import NODE_W, PORT_Y, PortItem, lod_of, scene_look

_WIRE_FLAGS = QGraphicsItem.GraphicsItemFlag.ItemIsSelectable   # made once: enum arithmetic costs per wire
_CACHED = QGraphicsItem.CacheMode.DeviceCoordinateCache
LABEL_PAD = 5.0
LABEL_GROW = 1.7  # the most a label grows when zoomed out
LABEL_READABLE = 0.9  # zoom below which labels grow to stay this size on screen
LABEL_ROOM = (48.0, 16.0)  # the label a wire's bounds always hold (a shape such as "64x7x7")
LABEL_MIN_LOD = 0.28  # below this zoom no label is drawn, not even on hover
ARC_MIN_SPAN = NODE_W * 1.6


def wraps(a: QPointF, b: QPointF) -> bool:
    """A wire from the end of one band to the start of the next (it goes around, through the gap)."""
    return b.x() - a.x() < -2 * NODE_W and b.y() - a.y() > 150


def wire_path(a: QPointF, b: QPointF, band_top: float | None = None) -> QPainterPath:
    """The curve from ``a`` (an output) to ``b`` (an input). ``band_top``: where the band of ``b`` begins
    (the top of the open blocks around it), when ``b`` is inside some; a wire that wraps to the next
    band runs through the gap above that, not across the band's own top (where a block beside may sit)."""
    path = QPainterPath(a)
    dx, dy = b.x() - a.x(), b.y() - a.y()
    if dx > ARC_MIN_SPAN and abs(dy) < 90:  # over the nodes between: an arc above them
        top = min(a.y(), b.y()) - PORT_Y - min(60.0, 25.0 + dx * 0.02)
        path.cubicTo(QPointF(a.x() + 50, top), QPointF(a.x() + 90, top), QPointF(a.x() + 130, top))
        path.lineTo(b.x() - 130, top)
        path.cubicTo(QPointF(b.x() - 90, top), QPointF(b.x() - 50, top), b)
        return path
    if wraps(a, b):  # to the start of the next band: around, through the gap above it
        if band_top is None or band_top >= b.y() - PORT_Y:
            return _around(a, b, b.y() - PORT_Y - 90)
        # wires into nodes deeper in the band keep lanes of their own (their labels apart), in the gap
        return _around(a, b, band_top - 90 + min(45.0, 0.4 * (b.y() - PORT_Y - band_top)))
    bend = max(40.0, abs(dx) * 0.5) if dx > 0 else max(80.0, min(240.0, -dx * 0.5 + abs(dy) * 0.3))
    bx, by = b.x(), b.y()
    path.cubicTo(a.x() + bend, a.y(), bx - bend, by, bx, by)   # numbers, not points: 20,000 wires open faster
    return path


def _around(a: QPointF, b: QPointF, lane: float) -> QPainterPath:
    r, out = 16.0, 26.0
    x1, x2 = a.x() + out, b.x() - out
    path = QPainterPath(a)
    path.lineTo(x1 - r, a.y())
    path.quadTo(x1, a.y(), x1, a.y() + r)
    path.lineTo(x1, lane - r)
    path.quadTo(x1, lane, x1 - r, lane)
    path.lineTo(x2 + r, lane)
    path.quadTo(x2, lane, x2, lane + r)
    path.lineTo(x2, b.y() - r)
    path.quadTo(x2, b.y(), x2 + r, b.y())
    path.lineTo(b)
    return path


class WireItem(QGraphicsItem):
    """The drawing of one :class:`Edge`, between two port items."""

    def __init__(self, edge: Edge, src: PortItem, dst: PortItem, label: str = "", error: bool = False) -> None:
        super().__init__()
        self.edge = edge
        self.src, self.dst = src, dst
        self.label = label   # laid out by update_path, once the wire is in a scene (its fonts)
        self.error = error
        self.hovered = False
        self._path = QPainterPath()
        self._length: float | None = None   # measured when first wanted (a cubic's length costs)
        self._label_rect: QRectF | None = QRectF()   # None: not placed yet (placed when first wanted)
        self._label_size = (0.0, 0.0)
        self._tip_dirty = False
        self._bounds = QRectF()
        self.setFlags(_WIRE_FLAGS)
        self.setCacheMode(_CACHED)
        self.setZValue(-1)
        self.setAcceptHoverEvents(True)
        src.wires.append(self)
        dst.wires.append(self)

    def rebind(self, src: PortItem, dst: PortItem) -> None:
        """Attach to other port items (a group was collapsed or expanded)."""
        if src is self.src and dst is self.dst:
            return
        if src is not self.src:
            if self in self.src.wires:   # a block's port that went lets its wires go (GraphScene._release)
                self.src.wires.remove(self)
            self.src = src
            src.wires.append(self)
        if dst is not self.dst:
            if self in self.dst.wires:
                self.dst.wires.remove(self)
            self.dst = dst
            dst.wires.append(self)
        self.update_path()

    def detach(self) -> None:
        for port in (self.src, self.dst):
            if self in port.wires:
                port.wires.remove(self)
                for other in port.wires:
                    other.update_path()

    def set_label(self, label: str, error: bool = False) -> None:
        if (label, error) != (self.label, self.error):
            self.label, self.error = label, error
            self._tip_dirty = True
            bounds = self._layout_label()
            if bounds != self._bounds:   # a label that outgrows LABEL_ROOM: Qt re-indexes the wire
                self.prepareGeometryChange()
                self._bounds = bounds
            self.update()

    def toolTip(self) -> str:  # noqa: N802 - Qt's name
        """Made when first wanted (the scene's help event), not for every wire at every check."""
        if self._tip_dirty or not super().toolTip():
            self._tip_dirty = False
            self.setToolTip(f"{self.edge}<br>{self.label}" if self.label else str(self.edge))
        return super().toolTip()

    def update_path(self) -> None:
        self.prepareGeometryChange()
        a, b = self.src.anchor(self), self.dst.anchor(self)
        self._path = wire_path(a, b, self._band_top(a, b) if wraps(a, b) else None)
        self._length = None
        self._bounds = self._layout_label()

    def _band_top(self, a: QPointF, b: QPointF) -> float | None:
        """The top of the outermost open block frame the wire enters to reach ``b`` from ``a`` (one
        around ``b`` but not around ``a``); None when it enters none."""
        frames = getattr(self.scene(), "frames", {})
        tops = [r.top() for f in frames.values()
                if f.isVisible() and (r := f.sceneBoundingRect()).contains(b) and not r.contains(a)]
        return min(tops) if tops else None

    def _layout_label(self) -> QRectF:
        """The label's size, and the wire's bounds (returned). Where the label sits (the curve's middle) is
        found when first wanted (:meth:`_label_box`): the bounds only need to hold it wherever on the curve
        it sits, so a 20,000-wire graph opens without measuring 20,000 curves. They hold a label of
        LABEL_ROOM at least, so that the first shapes shown change no wire's geometry."""
        scene = scene_look(self)
        size = (0.0, 0.0)
        if self.label and scene is not None and not self._path.isEmpty():
            size = (scene.metrics.advance("mono", self.label) + 2 * LABEL_PAD, scene.metrics.mono.height() + 3)
        self._label_size = size
        self._label_rect = None if size[0] else QRectF()
        half_w, half_h = max(size[0], LABEL_ROOM[0]) * LABEL_GROW / 2, max(size[1], LABEL_ROOM[1]) * LABEL_GROW / 2
        return self._path.boundingRect().adjusted(-half_w - 4, -half_h - 4, half_w + 4, half_h + 4)

    def _label_box(self) -> QRectF:
        """The label's box at scale 1, centred on the curve (empty without a label)."""
        if self._label_rect is None:
            width, height = self._label_size
            mid = self._path.pointAtPercent(0.5)
            self._label_rect = QRectF(mid.x() - width / 2, mid.y() - height / 2, width, height)
        return self._label_rect

    def length(self) -> float:
        if self._length is None:
            self._length = self._path.length()
        return self._length

    def ends(self) -> tuple[QPointF, QPointF]:
        """Where the drawn curve starts and ends, in scene coordinates."""
        return self._path.pointAtPercent(0.0), self._path.pointAtPercent(1.0)

    def curve(self) -> QPainterPath:
        """The drawn curve, in the item's coordinates (a copy: what a reader of the canvas sees wired)."""
        return QPainterPath(self._path)

    def path_rect(self) -> QRectF:
        """The rectangle around the drawn curve (its label aside)."""
        return self._path.boundingRect()

    def label_rect(self, lod: float) -> QRectF:
        """Where the label goes at zoom ``lod``; empty when it is not shown (too short on
        screen to hold it and not hovered, or zoomed too far out)."""
        if lod < LABEL_MIN_LOD or self._label_box().isEmpty():
            return QRectF()
        grow = max(1.0, min(LABEL_GROW, LABEL_READABLE / lod))
        rect = _scaled(self._label_box(), grow)
        fits = self.length() >= rect.width() + 12 / lod  # a few pixels of wire show either side
        return rect if fits or self.hovered else QRectF()

    def hoverEnterEvent(self, event: QGraphicsSceneHoverEvent) -> None:
        self.hovered = True
        self.update()

    def hoverLeaveEvent(self, event: QGraphicsSceneHoverEvent) -> None:
        self.hovered = False
        self.update()

    def boundingRect(self) -> QRectF:
        return self._bounds

    def shape(self) -> QPainterPath:
        stroker = QPainterPathStroker()
        stroker.setWidth(10)
        shape = stroker.createStroke(self._path)
        if not self._label_box().isEmpty():
            shape.addRect(self._label_box())
        return shape

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget: QWidget | None = None) -> None:
        scene = scene_look(self)
        if scene is None:  # Qt paints an item only while it is in a scene
            return
        theme = scene.theme
        lod = lod_of(painter)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, lod > 0.3)
        colour = theme.selected if self.isSelected() else theme.error if self.error else theme.wire
        painter.setPen(QPen(colour, 2.6 if self.isSelected() or self.hovered else 1.7))
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawPath(self._path)
        rect = self.label_rect(lod)
        if rect.isEmpty():
            return
        box = self._label_box()
        grow = rect.width() / box.width()
        painter.save()
        painter.translate(rect.topLeft())
        painter.scale(grow, grow)
        local = QRectF(0, 0, box.width(), box.height())
        painter.setPen(QPen(colour, 1))
        painter.setBrush(theme.wire_label_bg)
        painter.drawRoundedRect(local, 4, 4)
        painter.setFont(scene.fonts.mono)
        painter.setPen(theme.error if self.error else theme.shape_text)
        painter.drawText(local, Qt.AlignmentFlag.AlignCenter, self.label)
        painter.restore()


def _scaled(rect: QRectF, k: float) -> QRectF:
    """``rect`` grown ``k`` times about its centre."""
    c = rect.center()
    w, h = rect.width() * k, rect.height() * k
    return QRectF(c.x() - w / 2, c.y() - h / 2, w, h)


class DragWire(QGraphicsPathItem):
    """The wire that follows the mouse while a connection is being drawn."""

    def __init__(self, port: PortItem) -> None:
        super().__init__()
        self.port = port
        self.setZValue(5)
        self.set_state(None)

    def set_state(self, state: str | None) -> None:
        scene = scene_look(self.port.parentItem())
        if scene is None:  # the port left the scene: nothing to draw the wire in
            return
        theme = scene.theme
        colour = {"ok": theme.ok, "error": theme.error}.get(state or "", theme.selected)
        self.setPen(QPen(colour, 2, Qt.PenStyle.DashLine))

    def follow(self, pos: QPointF) -> None:
        a = self.port.anchor()
        self.setPath(wire_path(pos, a) if self.port.is_input else wire_path(a, pos))
