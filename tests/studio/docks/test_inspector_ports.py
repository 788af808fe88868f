"""The Inspector shows every output's shape of a node with several (Split, Chunk), named as its
ports are numbered on the canvas; the node is chosen with a real click on the canvas, the Chunk's count
changed through its spin box."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QUndoStack
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QHBoxLayout, QSpinBox, QWidget

from graph_editor.model import save_graph
from graph_editor.model.layout import layered_layout
from graph_editor.ui.canvas import GraphCanvas
from graph_editor.ui.controller import EditorController
from graph_editor.ui.live import LiveAnalysis
from studio.docks.inspector import InspectorDock
from tests.graph_editor.building.test_ports import split_net

from ..helpers import settle

pytestmark = pytest.mark.qt


def _click_node(view, node_id: str) -> None:
    item = view.graph_scene.nodes[node_id]
    view.ensureVisible(item)
    title = item.mapToScene(item.boundingRect().topLeft() + QPointF(12, 10))  # on its title bar
    QTest.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                     view.mapFromScene(title))


def _window(qtbot) -> tuple[EditorController, GraphCanvas, LiveAnalysis, QWidget, InspectorDock]:
    """The canvas and the Inspector side by side, wired as the main window wires them."""
    graph = split_net()
    for node_id, pos in layered_layout(graph).items():
        graph.nodes[node_id].position = pos
    editor = EditorController(graph, QUndoStack())
    live = LiveAnalysis(editor, analyze=False)
    host = QWidget()
    view, dock = GraphCanvas(editor, live), InspectorDock(editor)
    live.inferred.connect(lambda inf: dock.show_shapes(inf.shapes, inf.port_shapes))
    row = QHBoxLayout(host)
    row.addWidget(view, 3)
    row.addWidget(dock, 1)
    qtbot.addWidget(host)
    host.resize(1300, 600)
    host.show()
    qtbot.waitExposed(host)
    live.refresh()
    return editor, view, live, host, dock


def test_each_output_port_has_its_shape(qtbot, tmp_path):
    editor, view, live, host, dock = _window(qtbot)
    _click_node(view, "parts")                       # Split [1, 2] along dim 1 of 3x4
    assert editor.selection == ["parts"]
    assert dock.shape_title.text() == "Outputs"
    assert dock.shape_label.text().splitlines() == ["0   1x4", "1   2x4"]
    host.grab().save(str(tmp_path / "inspector_split.png"))
    _click_node(view, "halves")                      # Chunk 2 of 8
    assert dock.shape_label.text().splitlines() == ["0   4", "1   4"]
    chunks = dock.editors["chunks"]
    box = chunks if isinstance(chunks, QSpinBox) else chunks.findChild(QSpinBox)
    box.selectAll()
    QTest.keyClicks(box, "4")
    QTest.keyClick(box, Qt.Key.Key_Return)
    live.refresh()
    assert dock.shape_label.text().splitlines() == ["0   2", "1   2", "2   2", "3   2"]
    _click_node(view, "fc")                          # one output: as before
    assert dock.shape_title.text() == "Output" and dock.shape_label.text() == "12"


def test_the_main_window_gives_the_inspector_every_output(window, tmp_path):
    path = tmp_path / "split.graph.json"
    save_graph(split_net(), path)
    window.resize(1440, 900)        # the offscreen screen's default window leaves the canvas 152 px wide
    assert window.files.open(path)
    settle(window)
    _click_node(window.canvas, "parts")
    assert window.controller.selection == ["parts"]
    assert window.inspector.shape_label.text().splitlines() == ["0   1x4", "1   2x4"]
