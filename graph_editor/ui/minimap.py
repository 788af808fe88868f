"""The minimap: the whole graph in a corner of the canvas, with the visible part framed.

It draws node rectangles straight from the scene's items (no scene render) into a picture that is
kept until the scene's contents or the mapped area change (``GraphScene.revision``): a pan or a
scroll repaints the picture and the view's frame only (the 20,000-node chain had 20,000 rectangles
drawn on every paint, 3.8 s of opening it). Clicking or dragging in it moves the view there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QPointF, QRect, QRectF, Qt
from PySide6.QtGui import QMouseEvent, QPainter, QPaintEvent, QPen, QPixmap
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
        self._picture: QPixmap | None = None
        self._picture_key: tuple[object, ...] | None = None
        self.pictures_drawn = 0   # how often the nodes were drawn (tests: a scroll draws none)

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

    def map_rect(self, rect: QRectF) -> QRectF:
        """Where the scene rectangle ``rect`` is drawn on the minimap as it is now (a node's cell, the view's frame)."""
        return self.to_map(rect, *self._world())

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
        world, s, offset = self._world()
        painter = QPainter(self)
        painter.drawPixmap(0, 0, self._nodes_picture(world, s, offset))
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(QPen(self.canvas.graph_scene.theme.minimap_view, 1.5))
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawRect(self.to_map(self.canvas.visible_rect(), world, s, offset))

    def _nodes_picture(self, world: QRectF, s: float, offset: QPointF) -> QPixmap:
        """The background, nodes and blocks, drawn again only when they or the mapped area changed."""
        scene = self.canvas.graph_scene
        ratio = self.devicePixelRatioF()
        key = (scene.revision, id(scene.theme), world.getRect(), self.width(), self.height(), ratio)
        if self._picture is not None and key == self._picture_key:
            return self._picture
        picture = QPixmap(round(self.width() * ratio), round(self.height() * ratio))
        picture.setDevicePixelRatio(ratio)
        picture.fill(Qt.GlobalColor.transparent)
        theme = scene.theme
        painter = QPainter(picture)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(QPen(theme.group_border, 1))
        painter.setBrush(theme.minimap_bg)
        painter.drawRoundedRect(QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5), 6, 6)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        painter.setPen(Qt.PenStyle.NoPen)
        wx, wy, ox, oy = world.x(), world.y(), offset.x(), offset.y()
        by_colour: dict[str, set[tuple[int, int, int, int]]] = {}
        for x, y, w, h, category in scene.node_blocks():   # each pixel's rectangle once: thousands share a few
            by_colour.setdefault(category, set()).add((int((x - wx) * s + ox), int((y - wy) * s + oy),
                                                      max(2, round(w * s)), max(2, round(h * s))))
        for category, cells in by_colour.items():
            painter.setBrush(theme.category_color(category) if category else theme.error)
            painter.drawRects([QRect(*cell) for cell in cells])
        painter.setBrush(theme.group_border)
        painter.drawRects([self.to_map(box.sceneBoundingRect(), world, s, offset) for box in scene.boxes.values()])
        painter.end()
        self._picture, self._picture_key = picture, key
        self.pictures_drawn += 1
        return picture

    def _jump(self, event: QMouseEvent) -> None:
        world, s, offset = self._world()
        p = event.position()
        self.canvas.centerOn(QPointF((p.x() - offset.x()) / s + world.x(), (p.y() - offset.y()) / s + world.y()))

    def mousePressEvent(self, event: QMouseEvent) -> None:
        self._jump(event)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        if event.buttons() & Qt.MouseButton.LeftButton:
            self._jump(event)

