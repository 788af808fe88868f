"""A node's title is read whole on the canvas: every layer type's name, painted by the real node item."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtGui import QFontMetricsF, QImage, QPainter
from PySide6.QtWidgets import QStyleOptionGraphicsItem

from graph_editor.model import Graph, InputSpec
from graph_editor.model.catalog import all_layers
from graph_editor.model.geometry import NODE_W, TITLE_H
from graph_editor.ui.canvas import GraphCanvas
from graph_editor.ui.controller import EditorController
from graph_editor.ui.live import LiveAnalysis

pytestmark = pytest.mark.qt


class Recording(QPainter):
    """A painter that keeps each text it draws with the font it drew it in."""

    def __init__(self, image: QImage) -> None:
        super().__init__(image)
        self.texts: list[tuple[str, float, float]] = []   # text, its widest line, the line height

    def drawText(self, *args):   # noqa: N802 - QPainter's name
        if isinstance(args[-1], str):
            metrics = QFontMetricsF(self.font())
            widest = max(metrics.horizontalAdvance(line) for line in args[-1].split("\n"))
            self.texts.append((args[-1], widest, metrics.height()))
        super().drawText(*args)


def test_every_layer_type_s_title_is_painted_whole_inside_its_title_bar(qtbot, tmp_path: Path):
    from PySide6.QtGui import QUndoStack

    graph = Graph(InputSpec((3, 32, 32)), 10)
    specs = sorted(all_layers(), key=lambda s: s.type)
    for k, spec in enumerate(specs):
        graph.add_node(spec.type, f"n{k}", position=(180.0 * (k % 10), 170.0 * (k // 10)))
    editor = EditorController(graph, QUndoStack())
    view = GraphCanvas(editor, LiveAnalysis(editor, analyze=False))
    qtbot.addWidget(view)
    view.resize(1500, 900)
    view.show()
    inner = NODE_W - 20
    for k, spec in enumerate(specs):
        item = view.graph_scene.nodes[f"n{k}"]
        image = QImage(int(NODE_W) + 40, int(item.height) + 10, QImage.Format.Format_ARGB32)
        painter = Recording(image)
        item.paint(painter, QStyleOptionGraphicsItem(), None)
        painter.end()
        title, widest, line_height = painter.texts[0]
        lines = title.split("\n")
        assert " ".join(lines) == spec.display, f"{spec.type}: drawn as {title!r}"   # was "AdaptiveAvgPool..."
        assert widest <= inner and len(lines) * line_height <= TITLE_H
    view.fitInView(view.graph_scene.itemsBoundingRect())
    view.grab().save(str(tmp_path / "titles.png"))
