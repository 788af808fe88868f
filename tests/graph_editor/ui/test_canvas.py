"""The canvas driven as a person would: real mouse, key, wheel and drop events, offscreen."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt
from PySide6.QtGui import QDropEvent, QWheelEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from graph_editor.model import Edge
from graph_editor.ui.canvas import GraphCanvas
from graph_editor.ui.items import NodeItem
from graph_editor.ui.menus import context_actions
from graph_editor.ui.mime import GRAPH_MIME, LAYER_MIME
from graph_editor.ui.style import LIGHT


def at(view: GraphCanvas, scene_point: QPointF) -> QPoint:
    return view.mapFromScene(scene_point)


def port(view: GraphCanvas, node: str, name: str, is_input: bool) -> QPoint:
    item = view.graph_scene.nodes[node]
    return at(view, (item.in_ports if is_input else item.out_ports)[name].scenePos())


def drag(view: GraphCanvas, a: QPoint, b: QPoint, button=Qt.MouseButton.LeftButton,
         mods=Qt.KeyboardModifier.NoModifier) -> None:
    vp = view.viewport()
    QTest.mousePress(vp, button, mods, a)
    for k in range(1, 6):
        QTest.mouseMove(vp, a + (b - a) * (k / 5))
    QTest.mouseRelease(vp, button, mods, b)


def test_dragging_from_an_output_to_an_input_connects(editor, canvas):
    editor.add_node("ReLU", (900, 300))
    new = editor.last_added
    drag(canvas, port(canvas, "fc1", "out", False), port(canvas, new, "in", True))
    assert Edge("fc1", new) in editor.graph.edges
    assert Edge("fc1", new) in canvas.graph_scene.wires
    assert editor.undo_stack.undoText() == f"Connect fc1 to {new}"


def test_dragging_backwards_from_an_input_connects_too(editor, canvas):
    editor.add_node("ReLU", (900, 300))
    new = editor.last_added
    drag(canvas, port(canvas, new, "in", True), port(canvas, "pool1", "out", False))
    assert Edge("pool1", new) in editor.graph.edges


def test_a_refused_target_says_why_and_changes_nothing(editor, canvas, qtbot):
    count = len(editor.graph.edges)
    with qtbot.waitSignal(canvas.hint) as sig:
        drag(canvas, port(canvas, "fc2", "out", False), port(canvas, "conv1", "in", True))
    assert "cycle" in sig.args[0]
    assert canvas.reason_label.isVisible() and "cycle" in canvas.reason_label.text()
    assert len(editor.graph.edges) == count and editor.undo_stack.count() == 0


def test_dropping_on_an_occupied_single_input_replaces_its_wire(editor, canvas, qtbot):
    hints = []
    canvas.hint.connect(hints.append)
    drag(canvas, port(canvas, "conv1", "out", False), port(canvas, "flat1", "in", True))
    assert "connect conv1.out to flat1.in, replacing the wire from pool1" in hints
    assert [e for e in editor.graph.edges if e.dst == "flat1"] == [Edge("conv1", "flat1")]
    assert Edge("pool1", "flat1") not in canvas.graph_scene.wires
    editor.undo_stack.undo()
    assert [e for e in editor.graph.edges if e.dst == "flat1"] == [Edge("pool1", "flat1")]


def test_palette_drop_creates_a_node_where_it_lands(editor, canvas):
    data = QMimeData()
    data.setData(LAYER_MIME, b"Dropout")
    where = at(canvas, QPointF(500, 400))
    event = QDropEvent(QPointF(where), Qt.DropAction.CopyAction, data, Qt.MouseButton.LeftButton,
                       Qt.KeyboardModifier.NoModifier)
    canvas.dropEvent(event)
    node = editor.graph.nodes[editor.last_added]
    assert node.type == "Dropout" and abs(node.position[0] + 75 - 500) < 2 and abs(node.position[1] - 389) < 2
    assert editor.selection == [node.id] and canvas.graph_scene.nodes[node.id].isSelected()


def test_dropping_copied_nodes_pastes_them(editor, canvas):
    data = QMimeData()
    data.setData(GRAPH_MIME, editor.copy(["fc1", "relu2"], to_clipboard=False).encode())
    canvas.dropEvent(QDropEvent(QPointF(at(canvas, QPointF(300, 300))), Qt.DropAction.CopyAction, data,
                                Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier))
    assert len(editor.last_pasted) == 2 and len(editor.graph.nodes_of_type("Linear")) == 3


def test_delete_key_removes_selected_nodes_and_wires_in_one_step(editor, canvas, qtbot):
    canvas.graph_scene.wires[Edge("conv1", "relu1")].setSelected(True)
    editor.select(["fc2"])
    canvas.setFocus()
    QTest.keyClick(canvas, Qt.Key.Key_Delete)
    assert "fc2" not in editor.graph.nodes and Edge("conv1", "relu1") not in editor.graph.edges
    assert "fc2" not in canvas.graph_scene.nodes and editor.undo_stack.count() == 1
    editor.undo_stack.undo()
    assert "fc2" in canvas.graph_scene.nodes and Edge("conv1", "relu1") in canvas.graph_scene.wires


def test_alt_drag_cuts_the_wires_it_crosses(editor, canvas):
    wire = canvas.graph_scene.wires[Edge("relu1", "pool1")]
    mid = wire.src.anchor().x() / 2 + wire.dst.anchor().x() / 2
    drag(canvas, at(canvas, QPointF(mid, -60)), at(canvas, QPointF(mid, 120)), mods=Qt.KeyboardModifier.AltModifier)
    assert Edge("relu1", "pool1") not in editor.graph.edges
    assert len(editor.graph.edges) == 7 and editor.undo_stack.count() == 1


def test_rubber_band_and_ctrl_click_select(editor, canvas):
    drag(canvas, at(canvas, QPointF(340, -40)), at(canvas, QPointF(700, 150)))
    assert set(editor.selection) == {"relu1", "pool1"}
    title = canvas.graph_scene.nodes["fc1"].scenePos() + QPointF(60, 10)
    QTest.mouseClick(canvas.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.ControlModifier,
                     at(canvas, title))
    assert set(editor.selection) == {"relu1", "pool1", "fc1"}


def test_dragging_nodes_is_one_move_step(editor, canvas):
    editor.select(["relu1", "pool1"])
    start = at(canvas, canvas.graph_scene.nodes["relu1"].scenePos() + QPointF(60, 10))
    drag(canvas, start, start + QPoint(40, 100))
    assert editor.undo_stack.count() == 1
    assert editor.graph.nodes["relu1"].position == (400.0, 100.0)
    assert editor.graph.nodes["pool1"].position == (580.0, 100.0)
    editor.undo_stack.undo()
    assert canvas.graph_scene.nodes["relu1"].pos() == QPointF(360, 0)


def test_wheel_zooms_around_the_cursor(canvas):
    cursor = QPointF(300, 200)
    before = canvas.mapToScene(cursor.toPoint())
    event = QWheelEvent(cursor, canvas.viewport().mapToGlobal(cursor), QPoint(), QPoint(0, 240),
                        Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier, Qt.ScrollPhase.NoScrollPhase, False)
    QApplication.sendEvent(canvas.viewport(), event)
    assert canvas.zoom == pytest.approx(1.0015 ** 240)
    after = canvas.mapToScene(cursor.toPoint())
    assert abs(after.x() - before.x()) < 2 and abs(after.y() - before.y()) < 2


def test_middle_drag_pans(canvas):
    before = canvas.visible_rect().center()
    drag(canvas, QPoint(500, 300), QPoint(400, 250), button=Qt.MouseButton.MiddleButton)
    after = canvas.visible_rect().center()
    assert after.x() - before.x() == pytest.approx(100, abs=2) and after.y() - before.y() == pytest.approx(50, abs=2)


def test_space_drag_pans(canvas):
    canvas.setFocus()
    before = canvas.visible_rect().center()
    QTest.keyPress(canvas, Qt.Key.Key_Space)
    drag(canvas, QPoint(500, 300), QPoint(560, 300))
    QTest.keyRelease(canvas, Qt.Key.Key_Space)
    assert canvas.visible_rect().center().x() - before.x() == pytest.approx(-60, abs=2)


def test_fit_view_shows_every_node(canvas):
    canvas.zoom_at(0.2, QPointF(10, 10))
    canvas.fit_view()
    visible = canvas.visible_rect()
    assert all(visible.contains(item.sceneBoundingRect()) for item in canvas.graph_scene.nodes.values())


def test_tab_search_places_the_layer_at_the_cursor(editor, canvas, qtbot):
    canvas.open_search(QPointF(at(canvas, QPointF(600, 300))))
    assert canvas.search.isVisible()
    QTest.keyClicks(canvas.search.field, "batchnorm2")
    assert canvas.search.list.currentItem().data(Qt.ItemDataRole.UserRole) == "BatchNorm2d"
    QTest.keyClick(canvas.search.field, Qt.Key.Key_Return)
    node = editor.graph.nodes[editor.last_added]
    assert node.type == "BatchNorm2d" and not canvas.search.isVisible()
    assert abs(node.position[0] + 75 - 600) < 2


def test_tab_key_opens_the_search(canvas):
    canvas.setFocus()
    QTest.keyClick(canvas, Qt.Key.Key_Tab)
    assert canvas.search.isVisible()
    canvas.search.close()


def test_hovering_a_node_shows_its_tooltip_made_on_demand(editor, canvas, qtbot):
    """Node tooltips are made when first wanted (a Qt help event on the canvas), not at every change."""
    from PySide6.QtGui import QHelpEvent
    from PySide6.QtWidgets import QApplication, QToolTip

    with qtbot.waitSignal(canvas.live.inferred):
        editor.set_param("fc2", "in_features", 99)
    item = canvas.graph_scene.nodes["fc2"]
    where = at(canvas, item.sceneBoundingRect().center())
    event = QHelpEvent(QHelpEvent.Type.ToolTip, where, canvas.viewport().mapToGlobal(where))
    QApplication.sendEvent(canvas.viewport(), event)
    qtbot.waitUntil(QToolTip.isVisible, timeout=2000)
    assert "expects 99 input features, receives 84" in QToolTip.text()
    QToolTip.hideText()


def test_live_analysis_marks_a_broken_node_red_with_the_reason(editor, canvas, qtbot):
    with qtbot.waitSignal(canvas.live.inferred):
        editor.set_param("fc2", "in_features", 99)
    item = canvas.graph_scene.nodes["fc2"]
    assert item.severity == "error"
    assert "expects 99 input features, receives 84" in item.toolTip()
    assert canvas.graph_scene.wires[Edge("relu2", "fc2")].error
    with qtbot.waitSignal(canvas.live.inferred):
        editor.undo_stack.undo()
    assert item.severity is None and item.shape_text == "10"


def test_shapes_follow_a_parameter_edit(editor, canvas, qtbot):
    with qtbot.waitSignal(canvas.live.inferred):
        editor.set_param("conv1", "out_channels", 12)
    assert canvas.graph_scene.nodes["conv1"].shape_text == "12x28x28"
    assert canvas.graph_scene.wires[Edge("conv1", "relu1")].label == "12x28x28"
    assert ("out", "12") in canvas.graph_scene.nodes["conv1"].rows


def test_group_collapses_to_a_block_with_its_external_ports_and_expands(editor, canvas, qtbot):
    editor.group("features", ["conv1", "relu1", "pool1"])
    gid = editor.last_group
    scene = canvas.graph_scene
    box = scene.boxes[gid]
    assert not scene.nodes["relu1"].isVisible() and box.isVisible()
    assert list(box.in_ports) == [("conv1", "in")] and list(box.out_ports) == [("pool1", "out")]
    assert scene.wires[Edge("input1", "conv1")].dst is box.in_ports[("conv1", "in")]
    assert not scene.wires[Edge("conv1", "relu1")].isVisible()
    QTest.mouseDClick(canvas.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                      at(canvas, box.scenePos() + QPointF(80, 10)))
    assert editor.graph.groups[gid].collapsed is False
    assert scene.nodes["relu1"].isVisible() and gid in scene.frames and gid not in scene.boxes
    assert scene.wires[Edge("input1", "conv1")].dst is scene.nodes["conv1"].in_ports["in"]
    editor.ungroup(gid)
    assert not scene.frames and not scene.boxes


def test_dragging_a_block_moves_its_members(editor, canvas):
    editor.group("head", ["fc1", "relu2"])
    box = canvas.graph_scene.boxes[editor.last_group]
    start = at(canvas, box.scenePos() + QPointF(80, 10))
    drag(canvas, start, start + QPoint(0, 200))
    assert editor.graph.nodes["fc1"].position == (900.0, 200.0)
    assert editor.graph.nodes["relu2"].position == (1080.0, 200.0)


def test_double_click_on_a_node_activates_it(editor, canvas, qtbot):
    with qtbot.waitSignal(canvas.node_activated) as sig:
        QTest.mouseDClick(canvas.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                          at(canvas, canvas.graph_scene.nodes["fc1"].scenePos() + QPointF(60, 10)))
    assert sig.args == ["fc1"]


def test_replaced_graph_is_drawn(editor, canvas, graph):
    other = graph.copy()
    other.remove_node("fc2")
    editor.set_graph(other)
    assert "fc2" not in canvas.graph_scene.nodes and len(canvas.graph_scene.nodes) == len(other.nodes)
    editor.add_node("ReLU", (0, 0))
    assert editor.last_added in canvas.graph_scene.nodes


def test_theme_switch_and_grab(canvas):
    canvas.set_theme("light")
    assert canvas.graph_scene.theme is LIGHT
    image = canvas.grab().toImage()
    assert image.pixelColor(5, 5) == LIGHT.background
    with pytest.raises(ValueError, match="dark, light"):
        canvas.set_theme("sepia")


def test_minimap_shows_when_the_graph_is_out_of_view_and_jumps(canvas, qtbot):
    canvas.zoom_at(2.0, QPointF(500, 300))
    canvas.minimap.refresh()
    assert canvas.minimap.isVisible()
    QTest.mouseClick(canvas.minimap, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                     QPoint(canvas.minimap.width() - 10, canvas.minimap.height() // 2))
    assert canvas.visible_rect().center().x() > 1200
    canvas.fit_view()
    assert not canvas.minimap.isVisible()


def test_node_items_show_key_parameters(canvas):
    item: NodeItem = canvas.graph_scene.nodes["conv1"]
    assert item.title == "Conv2d" and item.subtitle == "conv1"
    assert ("out", "6") in item.rows and ("kernel", "5") in item.rows
    assert item.in_ports["in"].is_input and not item.out_ports["out"].is_input


def test_context_menu_offers_what_fits_the_item(editor, canvas):
    node_at = QPointF(at(canvas, canvas.graph_scene.nodes["relu1"].scenePos() + QPointF(60, 30)))
    editor.select(["conv1", "relu1"])
    actions = dict(context_actions(canvas, node_at, ask_name=lambda _: "block"))
    assert {"Copy", "Cut", "Duplicate", "Group into a block…", "Delete"} <= set(actions)
    actions["Group into a block…"]()
    gid = editor.last_group
    assert editor.graph.groups[gid].nodes == ["conv1", "relu1"]
    box_at = QPointF(at(canvas, canvas.graph_scene.boxes[gid].scenePos() + QPointF(80, 30)))
    box_actions = dict(context_actions(canvas, box_at))
    box_actions["Open block"]()
    assert editor.graph.groups[gid].collapsed is False
    empty = dict(context_actions(canvas, QPointF(at(canvas, QPointF(600, 500)))))
    assert {"Add layer…", "Paste", "Auto-layout", "Fit view"} <= set(empty)
    wire = canvas.graph_scene.wires[Edge("flat1", "fc1")]
    mid = wire.src.anchor() / 2 + wire.dst.anchor() / 2
    dict(context_actions(canvas, QPointF(at(canvas, mid))))["Cut wire"]()
    assert Edge("flat1", "fc1") not in editor.graph.edges


def test_a_wire_dropped_on_empty_canvas_offers_a_layer_placed_and_wired(editor, canvas):
    drag(canvas, port(canvas, "fc2", "out", False), at(canvas, QPointF(1700, 300)))
    assert canvas.search.isVisible()
    QTest.keyClicks(canvas.search.field, "softmax")
    QTest.keyClick(canvas.search.field, Qt.Key.Key_Return)
    new = editor.last_added
    assert editor.graph.nodes[new].type == "Softmax" and Edge("fc2", new) in editor.graph.edges
    assert editor.undo_stack.undoText() == "Add Softmax" and editor.selection == [new]
    editor.undo_stack.undo()
    assert new not in editor.graph.nodes


def test_a_wire_dropped_on_a_node_body_takes_its_input(editor, canvas):
    editor.add_node("ReLU", (900, 300))
    new = editor.last_added
    drag(canvas, port(canvas, "fc1", "out", False), at(canvas, QPointF(980, 340)))
    assert Edge("fc1", new) in editor.graph.edges and not canvas.search.isVisible()


def test_selecting_a_node_hidden_in_a_block_selects_the_block(editor, canvas, qtbot):
    editor.group("head", ["fc1", "relu2"])
    gid = editor.last_group
    with qtbot.waitSignal(canvas.live.inferred):
        editor.set_param("fc1", "in_features", 7)
    box = canvas.graph_scene.boxes[gid]
    assert box.error and "expects 7 input features" in box.toolTip()
    editor.select(["fc1"])
    assert box.isSelected()


def test_edit_keys_work_on_the_canvas_alone(editor, canvas):
    canvas.setFocus()
    editor.select(["fc1", "relu2"])
    QTest.keyClick(canvas, Qt.Key.Key_D, Qt.KeyboardModifier.ControlModifier)
    assert len(editor.graph.nodes_of_type("Linear")) == 3
    QTest.keyClick(canvas, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert len(editor.graph.nodes_of_type("Linear")) == 2
    QTest.keyClick(canvas, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    assert len(editor.selection) == len(editor.graph.nodes)


def test_a_wire_picked_up_from_an_input_moves_or_is_cut(editor, canvas):
    editor.add_node("ReLU", (900, 300))
    new = editor.last_added
    drag(canvas, port(canvas, "fc1", "in", True), port(canvas, new, "in", True))
    assert Edge("flat1", new) in editor.graph.edges and Edge("flat1", "fc1") not in editor.graph.edges
    assert editor.undo_stack.undoText() == f"Reconnect flat1 to {new}"
    editor.undo_stack.undo()
    assert Edge("flat1", "fc1") in editor.graph.edges and canvas.graph_scene.wires[Edge("flat1", "fc1")].isVisible()
    drag(canvas, port(canvas, "fc1", "in", True), at(canvas, QPointF(1000, 600)))
    assert Edge("flat1", "fc1") not in editor.graph.edges and not canvas.search.isVisible()
    editor.undo_stack.undo()
    start = port(canvas, "fc1", "in", True)
    drag(canvas, start, start + QPoint(2, 0))  # put back where it was: nothing changes
    assert editor.undo_stack.index() == 1 and canvas.graph_scene.wires[Edge("flat1", "fc1")].isVisible()
