"""Open a graph file in the canvas alone: ``python -m graph_editor.ui.preview FILE.graph.json``."""

from __future__ import annotations

import sys

from PySide6.QtGui import QUndoStack
from PySide6.QtWidgets import QApplication

from ..model import Graph, GraphFileError, load_graph
from .canvas import GraphCanvas
from .controller import EditorController
from .live import LiveAnalysis


def preview(argv: list[str]) -> int:
    """Open a graph file in the canvas alone (``python -m graph_editor.ui.preview FILE``)."""
    app = QApplication.instance() or QApplication(argv)
    try:
        graph = load_graph(argv[1]) if len(argv) > 1 else Graph()
    except GraphFileError as exc:
        print(f"cannot open: {exc}", file=sys.stderr)
        return 2
    controller = EditorController(graph, QUndoStack())
    canvas = GraphCanvas(controller, LiveAnalysis(controller))
    canvas.resize(1200, 700)
    canvas.setWindowTitle(f"Torch Studio canvas: {argv[1] if len(argv) > 1 else 'empty graph'}")
    canvas.show()
    canvas.fit_view()
    return app.exec()


if __name__ == "__main__":
    sys.exit(preview(sys.argv))
