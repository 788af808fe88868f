"""Thumbnails of graphs for the template gallery, drawn by the canvas's own items."""

from __future__ import annotations

import math

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QPainter, QPixmap

from ..model import Graph, validate
from ..model.layout import layered_layout
from .scene import GraphScene
from .style import DARK, Theme

BAND_HEIGHT = 260.0  # a band of nodes with the gap below it, for choosing how many bands fit


def render_thumbnail(graph: Graph, size: QSize, theme: Theme = DARK, relayout: bool = True) -> QPixmap:
    """A picture of ``graph`` fitted into ``size`` (shapes and problems as the canvas shows them).

    A network drawn as one long row would be a thin line at thumbnail size, so by default
    the picture uses the auto-layout (on a copy: ``graph`` is not changed); a graph with
    groups is drawn as it is placed (block by block: as the canvas shows it).
    """
    if relayout and len(graph) and not graph.groups:
        graph = graph.copy()
        row = layered_layout(graph, wrap=math.inf)
        width = max(x for x, _ in row.values()) - min(x for x, _ in row.values()) + 150
        bands = max(1, round(math.sqrt(width / (BAND_HEIGHT * size.width() / max(size.height(), 1)))))
        for node_id, pos in layered_layout(graph, wrap=width / bands + 1).items():
            graph.nodes[node_id].position = pos
    scene = GraphScene(graph, theme)
    scene.apply_inference(validate(graph))
    scene.realize_all()   # the picture is of every node and wire
    pixmap = QPixmap(size)
    pixmap.fill(theme.background)
    source = scene.items_rect()
    if source.isEmpty():
        return pixmap
    for wire in scene.wires.values():   # a wire wrapping to the next band goes out beyond the nodes
        if wire.isVisible():
            source = source.united(wire.mapRectToScene(wire.path_rect()))
    source = source.adjusted(-20, -20, 20, 20)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    scale = min(size.width() / source.width(), size.height() / source.height())
    w, h = source.width() * scale, source.height() * scale
    target = QRectF((size.width() - w) / 2, (size.height() - h) / 2, w, h)
    scene.render(painter, target, source, Qt.AspectRatioMode.KeepAspectRatio)
    painter.end()
    return pixmap
