"""The backward graph on the design canvas's machinery, alone (offscreen), driven by real events."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtTest import QTest

from graph_editor.autograd.capture import capture_autograd
from graph_editor.model import load_graph
from graph_editor.ui.groups import GroupBox
from studio.inspect.backward import AutogradItem, BackwardBox, BackwardView
from studio.resources import TEMPLATES

pytestmark = pytest.mark.qt


@pytest.fixture
def view(qtbot):
    v = BackwardView()
    qtbot.addWidget(v)
    v.resize(1200, 700)
    v.show()
    return v


def _show(view, template: str, batch: int = 4):
    forward = load_graph(TEMPLATES / f"{template}.graph.json")
    capture = capture_autograd(forward, batch)
    view.set_capture(capture, forward)
    return forward, capture


def _at(view, item, local=None) -> QPoint:
    view.ensureVisible(item, 10, 10)
    return view.mapFromScene(item.mapToScene(local if local is not None else item.boundingRect().center()))


def test_blocks_select_out_and_in_and_open_in_place(view, qtbot):
    _, capture = _show(view, "digits_cnn")
    scene = view.backward
    assert all(isinstance(b, BackwardBox) for b in scene.boxes.values())
    box = scene.boxes["conv2"]
    assert box.count_text() == "3 nodes" and box.stat_rows()[0][0] == "saved"
    assert box.in_text == "64x8x8" and box.shape_text == "32x8x8"       # dL/dy in, dL/dx out
    with qtbot.waitSignal(view.node_selected) as got:
        QTest.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, _at(view, box))
    assert got.args == ["conv2"] and view.selected_node() == "conv2"
    view.select("bn3")                                     # the design canvas selected bn3
    assert scene.boxes["bn3"].isSelected() and not scene.boxes["conv2"].isSelected()
    # double-click: open in place; the blocks after it move aside, nothing overlaps
    QTest.mouseDClick(view.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                      _at(view, scene.boxes["conv2"]))
    frame = scene.frames["conv2"]
    items = [scene.nodes[n] for n in view.controller.graph.groups["conv2"].nodes]
    assert all(isinstance(i, AutogradItem) and i.isVisible() for i in items)
    assert all(frame.rect.contains(i.sceneBoundingRect().adjusted(8, 3, -8, -3)) for i in items)
    assert not any(frame.rect.intersects(b.sceneBoundingRect()) for b in scene.boxes.values())
    conv = next(i for i in items if i.title == "ConvolutionBackward0")
    assert "input" in conv.toolTip() and "weight" in conv.toolTip()
    # a double-click on the open block's title closes it again
    QTest.mouseDClick(view.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                      view.mapFromScene(frame.header_rect().center()))
    assert "conv2" in scene.boxes and "conv2" not in scene.frames


def test_the_backward_canvas_edits_nothing(view, qtbot):
    _show(view, "digits_cnn")
    graph = view.controller.graph
    before = (len(graph.nodes), list(graph.edges), dict(graph.groups))
    box = view.backward.boxes["fc"]
    QTest.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, _at(view, box))
    for key in (Qt.Key.Key_Delete, Qt.Key.Key_Backspace, Qt.Key.Key_Tab):
        QTest.keyClick(view.viewport(), key)
    QTest.keyClick(view.viewport(), Qt.Key.Key_V, Qt.KeyboardModifier.ControlModifier)
    # a drag from a block's output port to another block's input port draws no wire
    src = next(iter(box.out_ports.values()))
    dst = next(iter(view.backward.boxes["dropout"].in_ports.values()))
    a, b = view.mapFromScene(src.scenePos()), view.mapFromScene(dst.scenePos())
    QTest.mousePress(view.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, a)
    QTest.mouseMove(view.viewport(), (a + b) / 2)
    QTest.mouseMove(view.viewport(), b)
    QTest.mouseRelease(view.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, b)
    assert (len(graph.nodes), list(graph.edges), dict(graph.groups)) == before
    assert not view.search.isVisible() and not view.acceptDrops()


@pytest.mark.slow
def test_a_node_inside_a_closed_design_block_selects_that_block(view, qtbot):
    forward, _ = _show(view, "resnet18_cifar", 2)
    scene = view.backward
    assert isinstance(scene.boxes["g_layer1"], GroupBox) and forward.groups["g_layer1"].collapsed
    view.select("layer1_0_conv1")
    assert view.controller.selection == ["g_layer1"] and scene.boxes["g_layer1"].isSelected()
    stage = scene.boxes["g_layer1"]
    assert stage.count_text().endswith("nodes") and stage.summary.saved_bytes == sum(
        s.saved_bytes for o, s in scene.summaries.items() if o.startswith("layer1_"))
