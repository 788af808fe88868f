"""The canvas with layers of several outputs and a learned tensor: real mouse and key events, offscreen."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QUndoStack
from PySide6.QtTest import QTest

from graph_editor.model import Edge
from graph_editor.model.geometry import node_size
from graph_editor.model.layout import layered_layout
from graph_editor.ui.canvas import GraphCanvas
from graph_editor.ui.controller import EditorController
from graph_editor.ui.live import LiveAnalysis
from tests.graph_editor.building.test_catalog_param import token_net
from tests.graph_editor.building.test_ports import split_net


def open_canvas(qtbot, graph) -> tuple[EditorController, GraphCanvas, LiveAnalysis]:
    for node_id, pos in layered_layout(graph).items():
        graph.nodes[node_id].position = pos
    editor = EditorController(graph, QUndoStack())
    live = LiveAnalysis(editor, analyze=False)
    view = GraphCanvas(editor, live)
    qtbot.addWidget(view)
    view.resize(1100, 600)
    view.show()
    qtbot.waitExposed(view)
    live.refresh()
    return editor, view, live


def port(view: GraphCanvas, node: str, name: str, is_input: bool) -> QPoint:
    item = view.graph_scene.nodes[node]
    return view.mapFromScene((item.in_ports if is_input else item.out_ports)[name].scenePos())


def drag(view: GraphCanvas, a: QPoint, b: QPoint) -> None:
    vp = view.viewport()
    QTest.mousePress(vp, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, a)
    for k in range(1, 6):
        QTest.mouseMove(vp, a + (b - a) * (k / 5))
    QTest.mouseRelease(vp, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, b)


@pytest.fixture
def split_canvas(qtbot):
    return open_canvas(qtbot, split_net())


def test_each_output_is_a_port_and_a_drag_from_it_wires_that_output(split_canvas, tmp_path):
    editor, view, live = split_canvas
    item = view.graph_scene.nodes["parts"]
    assert list(item.out_ports) == ["out", "out1"] and item.many_outputs
    assert item.shape_text == "1x4 | 2x4"
    ys = [p.scenePos().y() for p in item.out_ports.values()]
    assert ys[1] > ys[0] and item.sceneBoundingRect().contains(item.out_ports["out1"].scenePos() - QPointF(1, 0))
    wire = view.graph_scene.wires[Edge("parts", "flat1", "out1", "in")]
    assert wire.src is item.out_ports["out1"]  # the wire leaves from its own port
    editor.add_node("Flatten", (item.pos().x() + 200, item.pos().y() + 260))
    new = editor.last_added
    view.centerOn(item.sceneBoundingRect().center() + QPointF(100, 120))
    drag(view, port(view, "parts", "out1", False), port(view, new, "in", True))
    assert Edge("parts", new, "out1", "in") in editor.graph.edges
    assert view.graph_scene.wires[Edge("parts", new, "out1", "in")].src is item.out_ports["out1"]
    live.refresh()
    assert view.graph_scene.wires[Edge("parts", new, "out1", "in")].label == "2x4"
    view.grab().save(str(tmp_path / "ports.png"))


def test_ports_follow_the_parameters_and_a_read_port_stays_as_an_error(split_canvas):
    editor, view, live = split_canvas
    item = view.graph_scene.nodes["parts"]
    editor.set_param("parts", "sizes", [1, 1, 1])
    assert list(item.out_ports) == ["out", "out1", "out2"]
    editor.set_param("parts", "sizes", [3])  # flat1 still reads out1
    live.refresh()
    assert list(item.out_ports) == ["out", "out1"] and item.out_ports["out1"].dangling
    assert view.graph_scene.nodes["flat1"].severity == "error"
    view.setFocus()
    QTest.keyClick(view, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)  # back to three parts
    QTest.keyClick(view, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)  # back to [1, 2]
    live.refresh()
    assert editor.graph.nodes["parts"].params["sizes"] == [1, 2]
    assert list(item.out_ports) == ["out", "out1"] and not item.out_ports["out1"].dangling
    assert view.graph_scene.nodes["flat1"].severity is None


def test_many_outputs_make_a_taller_node_and_layouts_know_it(split_canvas):
    editor, view, live = split_canvas
    item, g = view.graph_scene.nodes["parts"], editor.graph
    editor.set_param("parts", "sizes", [1] * 8)  # eight ports (flat1 still reads out1)
    assert len(item.out_ports) == 8 and item.height == node_size(g.nodes["parts"])[1]
    assert item.height > node_size(g.nodes["flat0"])[1]
    assert all(item.shape().contains(p.pos() - QPointF(2, 0)) for p in item.out_ports.values())


def test_copy_paste_by_keys_keeps_the_ports(split_canvas):
    editor, view, live = split_canvas
    view.setFocus()
    editor.select(["parts", "flat0", "flat1"])
    QTest.keyClick(view, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    before = set(editor.graph.nodes)
    QTest.keyClick(view, Qt.Key.Key_V, Qt.KeyboardModifier.ControlModifier)
    pasted = set(editor.graph.nodes) - before
    split = next(n for n in pasted if editor.graph.nodes[n].type == "Split")
    assert {e.src_port for e in editor.graph.out_edges(split)} == {"out", "out1"}
    assert view.graph_scene.nodes[split].out_ports["out1"].wires


def test_a_learned_tensor_is_drawn_as_a_source(qtbot, tmp_path):
    editor, view, live = open_canvas(qtbot, token_net())
    item = view.graph_scene.nodes["pos_embed"]
    assert item.source and not item.in_ports and list(item.out_ports) == ["out"]
    assert item.severity is None and item.shape_text == "5x16"
    assert not view.graph_scene.nodes["proj"].source
    assert item.boundingRect().left() < -15  # room for its tensor mark left of the node
    view.grab().save(str(tmp_path / "params.png"))
