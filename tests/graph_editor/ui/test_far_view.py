"""Zoomed far out the canvas paints from tiles (graph_editor/ui/far_view.py): what it shows must be what
the items paint, after a selection or a move too, and a pan or a zoom step must not render the scene again.
The oracle is a second canvas on the same graph that paints its items as QGraphicsView does."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QImage, QUndoStack
from PySide6.QtTest import QTest

from graph_editor.model import Graph, InputSpec
from graph_editor.ui.canvas import ZOOM_SETTLE_MS, GraphCanvas
from graph_editor.ui.controller import EditorController
from graph_editor.ui.live import LiveAnalysis

ZOOM, CENTRE = 0.3, QPointF(2400, 40)


def chain(n: int) -> Graph:
    g = Graph(InputSpec((8,)), num_classes=2)
    g.chain(("Input", "input"), *[("ReLU", f"r{i}") for i in range(n)], ("Linear", "fc", {"out_features": 2}),
            ("Output", "output"))
    for k, node in enumerate(g):
        node.position = (180.0 * k, 0.0)
    return g


def shown(qtbot, controller: EditorController) -> GraphCanvas:
    live = LiveAnalysis(controller, analyze=False)
    view = GraphCanvas(controller, live)
    qtbot.addWidget(view)
    view.resize(900, 500)
    view.show()
    qtbot.waitExposed(view)
    live.refresh()
    return view


def look_at(view: GraphCanvas, zoom: float = ZOOM, centre: QPointF = CENTRE) -> None:
    view.resetTransform()
    view.scale(zoom, zoom)
    view.centerOn(centre)


def frame(view: GraphCanvas) -> QImage:
    return view.viewport().grab().toImage()


def tiled(view: GraphCanvas, qtbot) -> QImage:
    """A frame once the tiles around the view are rendered (after the first frame, one per event-loop turn)."""
    frame(view)
    qtbot.waitUntil(lambda: not view.far.filling(), timeout=5000)
    return frame(view)


def differing(a: QImage, b: QImage) -> int:
    """Pixels that differ by more than antialiasing noise (in any channel)."""
    def pixels(image: QImage) -> np.ndarray:
        image = image.convertToFormat(QImage.Format.Format_RGB32)
        return np.frombuffer(image.constBits(), np.uint8).reshape(image.height(), image.bytesPerLine())
    return int((np.abs(pixels(a).astype(int) - pixels(b).astype(int)) > 24).sum())


@pytest.fixture
def pair(qtbot, monkeypatch):
    controller = EditorController(chain(80), QUndoStack())
    far, oracle = shown(qtbot, controller), shown(qtbot, controller)
    monkeypatch.setattr(oracle, "far_mode", lambda: False)   # paints every item, as QGraphicsView does
    for view in (far, oracle):
        look_at(view)
    return controller, far, oracle


def test_a_far_frame_is_what_the_items_paint_and_a_pan_renders_nothing_new(pair, qtbot):
    _, far, oracle = pair
    assert far.far_mode()
    assert differing(frame(far), frame(oracle)) == 0   # no tiles yet: the items, painted once
    assert far.far.rendered == 0
    first = tiled(far, qtbot)
    assert far.far.rendered > 0 and differing(first, frame(oracle)) == 0
    rendered = far.far.rendered
    for view in (far, oracle):
        view.pan_by(-7, 0)
    assert differing(frame(far), frame(oracle)) == 0
    assert far.far.rendered == rendered      # a small pan: the tiles it had


def test_a_selection_and_a_move_show_in_the_far_frame(pair, qtbot):
    controller, far, oracle = pair
    tiled(far, qtbot)
    node = far.graph_scene.nodes["r13"]
    QTest.mouseClick(far.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                     far.mapFromScene(node.sceneBoundingRect().center()))
    assert controller.selection == ["r13"]
    assert differing(tiled(far, qtbot), frame(oracle)) == 0    # the scene says what changed from the event loop
    controller.move_nodes({"r14": (2520.0, 160.0)})
    assert differing(tiled(far, qtbot), frame(oracle)) == 0


def test_a_zoom_step_scales_the_tiles_then_renders_them_anew_once_it_settles(pair, qtbot):
    _, far, oracle = pair
    tiled(far, qtbot)
    rendered = far.far.rendered
    centre = QPointF(far.viewport().rect().center())
    far.zoom_at(1.1, centre)
    frame(far)
    assert far.far.rendered == rendered          # the gesture's frame: the tiles it had, scaled
    qtbot.wait(ZOOM_SETTLE_MS + 100)
    oracle.setTransform(far.transform())
    oracle.horizontalScrollBar().setValue(far.horizontalScrollBar().value())
    oracle.verticalScrollBar().setValue(far.verticalScrollBar().value())
    settled = tiled(far, qtbot)
    assert far.far.rendered > rendered and differing(settled, frame(oracle)) == 0
