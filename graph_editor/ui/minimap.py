"""The minimap: the whole graph in a corner of the canvas, with the visible part framed.

It paints node rectangles straight from the scene's items (no scene render), so it stays
cheap with hundreds of nodes; clicking or dragging in it moves the view there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QMouseEvent, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import QWidget

if TYPE_CHECKING:
    from .canvas import GraphCanvas

SIZE = (200, 130)
MARGIN = 12


class Minimap(QWidget):
    """An overlay in the bottom-right corner of a :class:`GraphCanvas`."""

    def __init__(self, canvas: GraphCanvas) -> None:
        super().__init__(canvas)
        self.canvas = canvas
        self.resize(*SIZE)
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setToolTip("Overview: click or drag to move the view")

    def place(self) -> None:
        """Stick to the bottom-right corner of the viewport, about a fifth of its width."""
        vp = self.canvas.viewport().geometry()
        width = max(120, min(SIZE[0], vp.width() // 5))
        self.resize(width, int(width * SIZE[1] / SIZE[0]))
        self.move(vp.right() - self.width() - MARGIN, vp.bottom() - self.height() - MARGIN)

    def _world(self) -> tuple[QRectF, float, QPointF]:
        scene = self.canvas.graph_scene
        world = scene.items_rect().united(self.canvas.visible_rect()).adjusted(-40, -40, 40, 40)
        s = min((self.width() - 8) / max(world.width(), 1), (self.height() - 8) / max(world.height(), 1))
        offset = QPointF((self.width() - world.width() * s) / 2, (self.height() - world.height() * s) / 2)
        return world, s, offset

    def to_map(self, rect: QRectF, world: QRectF, s: float, offset: QPointF) -> QRectF:
        return QRectF((rect.x() - world.x()) * s + offset.x(), (rect.y() - world.y()) * s + offset.y(),
                      max(rect.width() * s, 1.5), max(rect.height() * s, 1.5))

    def refresh(self) -> None:
        """Show only when some of the graph is out of view and the canvas has room for it (on a
        canvas under three minimaps wide or high it would hide the nodes it maps); repaint."""
        items = self.canvas.graph_scene.items_rect()
        vp = self.canvas.viewport().size()
        roomy = vp.width() >= 3 * self.width() and vp.height() >= 3 * self.height()
        needed = (self.canvas.enable_minimap and roomy and not items.isEmpty()
                  and not self.canvas.visible_rect().contains(items))
        self.setVisible(needed)
        if needed:
            self.update()

    def paintEvent(self, event: QPaintEvent) -> None:
        scene = self.canvas.graph_scene
        theme = scene.theme
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(QPen(theme.group_border, 1))
        painter.setBrush(theme.minimap_bg)
        painter.drawRoundedRect(QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5), 6, 6)
        world, s, offset = self._world()
        painter.setPen(Qt.PenStyle.NoPen)
        for item in scene.nodes.values():
            if item.isVisible():
                painter.setBrush(theme.error if item.severity == "error" else theme.category_color(item.category))
                painter.drawRect(self.to_map(item.sceneBoundingRect(), world, s, offset))
        painter.setBrush(theme.group_border)
        for box in scene.boxes.values():
            painter.drawRect(self.to_map(box.sceneBoundingRect(), world, s, offset))
        painter.setPen(QPen(theme.minimap_view, 1.5))
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawRect(self.to_map(self.canvas.visible_rect(), world, s, offset))

    def _jump(self, event: QMouseEvent) -> None:
        world, s, offset = self._world()
        p = event.position()
        self.canvas.centerOn(QPointF((p.x() - offset.x()) / s + world.x(), (p.y() - offset.y()) / s + world.y()))

    def mousePressEvent(self, event: QMouseEvent) -> None:
        self._jump(event)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        if event.buttons() & Qt.MouseButton.LeftButton:
            self._jump(event)
