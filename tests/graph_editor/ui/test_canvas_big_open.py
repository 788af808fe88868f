"""What opening a big graph fast rests on: ports are painted and found by their nodes (no Qt item each),
and a big graph's items are left out of the garbage collector's walks without leaking when it goes.
Real events on an offscreen canvas."""

from __future__ import annotations

import gc
import weakref

from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QHelpEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QToolTip

from graph_editor.model import Edge, Graph, InputSpec
from graph_editor.ui import controller as controller_module
from graph_editor.ui.canvas import GraphCanvas
from graph_editor.ui.items import NodeItem


def test_a_node_brings_no_port_items_into_the_scene(canvas):
    scene = canvas.graph_scene
    assert all(isinstance(item, NodeItem) or not hasattr(item, "is_input") for item in scene.items())
    assert len(scene.items()) < 2 * len(scene.nodes) + 2   # nodes and wires (a port item each made it 4x)


def test_hovering_a_port_shows_what_it_is(canvas, qtbot):
    port = canvas.graph_scene.nodes["fc1"].in_ports["in"]
    where = canvas.mapFromScene(port.scenePos() + QPointF(-6, 0))   # its outer half, off the node's body
    event = QHelpEvent(QHelpEvent.Type.ToolTip, where, canvas.viewport().mapToGlobal(where))
    QApplication.sendEvent(canvas.viewport(), event)
    qtbot.waitUntil(QToolTip.isVisible, timeout=2000)
    assert QToolTip.text() == "fc1.in: input"
    QToolTip.hideText()


def test_a_double_click_on_a_port_opens_its_node(canvas, qtbot):
    port = canvas.graph_scene.nodes["relu2"].out_ports["out"]
    with qtbot.waitSignal(canvas.node_activated) as activated:
        QTest.mouseDClick(canvas.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                          canvas.mapFromScene(port.scenePos() + QPointF(6, 0)))
    assert activated.args == ["relu2"]


def chain(n: int) -> Graph:
    g = Graph(InputSpec((8,)), num_classes=2)
    g.chain(("Input", "input"), *[("ReLU", f"r{i}") for i in range(n)], ("Output", "output"))
    for k, node in enumerate(g):
        node.position = (180.0 * k, 0.0)
    return g


def test_a_big_graphs_items_are_frozen_and_freed_when_it_goes(editor, canvas, monkeypatch):
    monkeypatch.setattr(controller_module, "FREEZE_AT", 20)   # "big" for this test
    was_enabled = gc.isenabled()
    try:
        editor.set_graph(chain(30))
        assert gc.get_freeze_count() > 0       # the collector leaves them alone
        scene = canvas.graph_scene
        node, wire = weakref.ref(scene.nodes["r3"]), weakref.ref(scene.wires[Edge("r3", "r4")])
        gc.disable()                           # what frees them must not be the collector
        editor.set_graph(chain(3))            # small: nothing frozen any more
        assert gc.get_freeze_count() == 0
        assert node() is None and wire() is None   # no cycle (node, port, wire) kept them
        assert isinstance(canvas, GraphCanvas) and len(canvas.graph_scene.nodes) == 5
    finally:
        gc.unfreeze()
        if was_enabled:
            gc.enable()
