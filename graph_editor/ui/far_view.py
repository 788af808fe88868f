"""The canvas zoomed out, drawn from pictures of the scene.

Below :data:`~graph_editor.ui.items.SIMPLE_LOD` nodes are coloured blocks without text, and a screen
holds hundreds or thousands of them: painting each item every frame took 90-115 ms with 2,000 nodes on
screen. :class:`FarPicture` keeps the scene as square tiles rendered at the view's scale (the grid and
the items, exactly as the view paints them: ``GraphScene.render`` of the tile's area) and a frame is a
few pixmap copies. A tile is rendered again when something in it changes (the scene's ``changed``
rectangles, or its ``revision``). While a zoom gesture goes on, frames show the tiles of the scale it
started from, scaled (a little soft; at most 2x, past that it renders anew); once it settles the tiles
of the new scale are rendered, as a map viewer does.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from PySide6.QtCore import QRect, QRectF
from PySide6.QtGui import QPainter, QPixmap, QTransform
from PySide6.QtWidgets import QGraphicsView, QStyle, QStyleOptionRubberBand

if TYPE_CHECKING:
    from .scene import GraphScene

TILE = 512         # view pixels a side
MAX_STRETCH = 2.0  # a zoom gesture's frames scale tiles at most this much; past it they are rendered anew
MAX_TILES = 60     # kept at once (60 MiB at most): a full-HD screen takes 15, the rest is room to pan back


class FarPicture:
    """Tiles of ``scene`` as ``view`` shows it, per scale; ``paint`` draws a view's exposed part from them."""

    def __init__(self, view: QGraphicsView, scene: GraphScene) -> None:
        self._view, self._scene = view, scene
        self._tiles: dict[tuple[float, int, int], QPixmap] = {}   # oldest use first
        self._revision = scene.revision
        self.anchor: float | None = None   # the scale the tiles drawn are of
        self.rendered = 0                   # tiles rendered so far (what a frame cost, for tests)
        scene.changed.connect(self.invalidate)

    def invalidate(self, rects: list[QRectF]) -> None:
        """Drop the tiles that show any of ``rects`` (scene coordinates)."""
        for key in list(self._tiles):
            scale, ix, iy = key
            area = _tile_rect(scale, ix, iy)
            if any(r.intersects(area) for r in rects):
                del self._tiles[key]

    def clear(self) -> None:
        self._tiles.clear()

    def paint(self, painter: QPainter, exposed: QRect, scale: float, gesture: bool) -> None:
        """Paint ``exposed`` (viewport pixels) at the view's ``scale``; during a zoom ``gesture`` from the tiles
        of the scale it began at."""
        if self._scene.revision != self._revision:   # items changed what they are (states, positions)
            self._revision = self._scene.revision
            self._tiles.clear()
        if not gesture or self.anchor is None or not 1 / MAX_STRETCH <= scale / self.anchor <= MAX_STRETCH:
            if self.anchor != scale:
                self._tiles = {k: v for k, v in self._tiles.items() if k[0] == scale}
            self.anchor = scale
        anchor = self.anchor
        k = scale / anchor
        to_view = self._view.viewportTransform()         # scene -> viewport: (scale * x + dx, scale * y + dy)
        dx, dy = to_view.dx(), to_view.dy()
        left, top = (exposed.left() - dx) / k, (exposed.top() - dy) / k      # in the anchor's view pixels
        right, bottom = (exposed.right() + 1 - dx) / k, (exposed.bottom() + 1 - dy) / k
        painter.save()
        painter.setTransform(QTransform(k, 0, 0, k, dx, dy))
        if k != 1:
            painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
        for iy in range(math.floor(top / TILE), math.floor((bottom - 1e-9) / TILE) + 1):
            for ix in range(math.floor(left / TILE), math.floor((right - 1e-9) / TILE) + 1):
                painter.drawPixmap(ix * TILE, iy * TILE, self._tile(anchor, ix, iy))
        painter.restore()

    def _tile(self, scale: float, ix: int, iy: int) -> QPixmap:
        key = (scale, ix, iy)
        found = self._tiles.pop(key, None)
        if found is None:
            found = self._render(scale, ix, iy)
        self._tiles[key] = found      # now the newest
        while len(self._tiles) > MAX_TILES:
            del self._tiles[next(iter(self._tiles))]
        return found

    def _render(self, scale: float, ix: int, iy: int) -> QPixmap:
        ratio = self._view.viewport().devicePixelRatioF()
        pixmap = QPixmap(round(TILE * ratio), round(TILE * ratio))
        pixmap.setDevicePixelRatio(ratio)
        source = _tile_rect(scale, ix, iy)
        painter = QPainter(pixmap)
        painter.setTransform(QTransform(scale, 0, 0, scale, -ix * TILE, -iy * TILE))
        self._view.drawBackground(painter, source)      # the grid, as the view's background cache draws it (aliased)
        painter.resetTransform()
        painter.setRenderHints(self._view.renderHints())
        self._scene.render_items(painter, QRectF(0, 0, TILE, TILE), source)
        painter.end()
        self.rendered += 1
        return pixmap


def paint_rubber_band(view: QGraphicsView, painter: QPainter) -> None:
    """The rubber band as QGraphicsView paints it over its items."""
    band = view.rubberBandRect()
    if band.isEmpty():
        return
    option = QStyleOptionRubberBand()
    option.initFrom(view.viewport())
    option.rect = band
    option.shape = QStyleOptionRubberBand.Shape.Rectangle  # type: ignore[attr-defined]
    view.style().drawControl(QStyle.ControlElement.CE_RubberBand, option, painter, view.viewport())


def _tile_rect(scale: float, ix: int, iy: int) -> QRectF:
    """The scene area tile (ix, iy) of ``scale`` shows."""
    side = TILE / scale
    return QRectF(ix * side, iy * side, side, side)

