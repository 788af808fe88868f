"""The canvas zoomed out, drawn from pictures of the scene.

Below :data:`~graph_editor.ui.items.SIMPLE_LOD` nodes are coloured blocks without text, and a screen holds
hundreds or thousands of them: painting each item every frame took 90-115 ms with 2,000 nodes on screen.
:class:`FarPicture` keeps the scene as square tiles rendered at the view's scale (the grid and the items,
exactly as the view paints them: ``GraphScene.render`` of the tile's area) and a frame is a few pixmap
copies. Tiles are rendered after a frame, one per turn of the event loop, for the view and a ring of tiles
around it; a frame that finds most of its tiles missing paints its area directly, in one pass (the items,
and the nodes without items drawn from the grid: :mod:`~graph_editor.ui.far_sketch`). A tile is rendered
again when something in it changes (the scene's ``changed`` rectangles, or its ``revision``). While a zoom
gesture goes on, frames show the tiles of the scale it started from, scaled (a little soft; at most 2x, past
that it renders anew); once it settles the tiles of the new scale are rendered, as a map viewer does.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from PySide6.QtCore import QRect, QRectF, QTimer
from PySide6.QtGui import QPainter, QPixmap, QTransform
from PySide6.QtWidgets import QGraphicsView, QStyle, QStyleOptionRubberBand

if TYPE_CHECKING:
    from .scene import GraphScene

TILE = 512         # view pixels a side
MAX_STRETCH = 2.0  # a zoom gesture's frames scale tiles at most this much; past it they are rendered anew
FEW_MISSING = 2    # a frame renders up to this many missing tiles itself (a pan reaching new ground)
MAX_TILES = 60     # kept at once (60 MiB at most): a full-HD screen and its ring take 35, the rest is room to pan back


class FarPicture:
    """Tiles of ``scene`` as ``view`` shows it, per scale; ``paint`` draws a view's exposed part from them."""

    def __init__(self, view: QGraphicsView, scene: GraphScene) -> None:
        self._view, self._scene = view, scene
        self._tiles: dict[tuple[float, int, int], QPixmap] = {}   # oldest use first
        self._revision = scene.revision
        self.anchor: float | None = None   # the scale the tiles drawn are of
        self.rendered = 0                   # tiles rendered so far (what a frame cost, for tests)
        self._fill = QTimer(view)
        self._fill.setSingleShot(True)
        self._fill.timeout.connect(self._fill_one)
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

    def filling(self) -> bool:
        """Whether tiles are still being rendered after a frame."""
        return self._fill.isActive()

    def paint(self, painter: QPainter, exposed: QRect, scale: float, gesture: bool) -> bool:
        """Paint ``exposed`` (viewport pixels) at the view's ``scale``; during a zoom ``gesture`` from the tiles
        of the scale it began at. Returns False, painting nothing, when most of those tiles are missing
        (the graph was just opened or edited throughout): the view paints its area once, as rendering
        every tile would cost several times that, and the tiles are rendered after the frame, one per
        turn of the event loop."""
        self._sync()
        if not gesture or self.anchor is None or not 1 / MAX_STRETCH <= scale / self.anchor <= MAX_STRETCH:
            if self.anchor != scale:
                self._tiles = {k: v for k, v in self._tiles.items() if k[0] == scale}
            self.anchor = scale
        anchor = self.anchor
        k = scale / anchor
        to_view = self._view.viewportTransform()         # scene -> viewport: (scale * x + dx, scale * y + dy)
        dx, dy = to_view.dx(), to_view.dy()
        keys = _keys(anchor, QRectF(exposed.left() - dx, exposed.top() - dy, exposed.width(), exposed.height()), k)
        missing = sum(key not in self._tiles for key in keys)
        self._fill.start()
        if missing > FEW_MISSING and not gesture:
            return False
        painter.save()
        painter.setTransform(QTransform(k, 0, 0, k, dx, dy))
        if k != 1:
            painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
        for key in keys:
            painter.drawPixmap(key[1] * TILE, key[2] * TILE, self._tile(key))
        painter.restore()
        return True

    def _sync(self) -> None:
        if self._scene.revision != self._revision:   # items changed what they are (states, positions)
            self._revision = self._scene.revision
            self._tiles.clear()

    def _fill_one(self) -> None:
        """Render one missing tile of the view and the ring around it (where a pan goes next); again until none
        is missing. Not while a zoom gesture goes on or the view is not far out."""
        view = self._view
        scale = view.transform().m11()
        if not getattr(view, "far_mode", lambda: False)() or self.anchor != scale:
            return
        self._sync()
        to_view = view.viewportTransform()
        around = QRectF(view.viewport().rect()).adjusted(-TILE, -TILE, TILE, TILE).translated(-to_view.dx(),
                                                                                              -to_view.dy())
        wanted = [key for key in _keys(scale, around, 1.0) if key not in self._tiles]
        if wanted and len(self._tiles) < MAX_TILES:
            self._tile(wanted[0])
            if len(wanted) > 1:
                self._fill.start()

    def _tile(self, key: tuple[float, int, int]) -> QPixmap:
        found = self._tiles.pop(key, None)
        if found is None:
            found = self._render(*key)
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


def _keys(scale: float, area: QRectF, k: float) -> list[tuple[float, int, int]]:
    """The tiles of ``scale`` under ``area`` (view pixels at ``k`` times that scale, the view's origin at 0)."""
    left, top, right, bottom = area.left() / k, area.top() / k, area.right() / k, area.bottom() / k
    return [(scale, ix, iy) for iy in range(math.floor(top / TILE), math.floor((bottom - 1e-9) / TILE) + 1)
            for ix in range(math.floor(left / TILE), math.floor((right - 1e-9) / TILE) + 1)]


def _tile_rect(scale: float, ix: int, iy: int) -> QRectF:
    """The scene area tile (ix, iy) of ``scale`` shows."""
    side = TILE / scale
    return QRectF(ix * side, iy * side, side, side)

