"""Editing through the shell: palette drops, Edit-menu commands with undo/redo, the inspector."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QEvent, QPoint, QPointF, Qt
from PySide6.QtGui import QDragEnterEvent, QDragMoveEvent, QDropEvent
from PySide6.QtWidgets import QApplication

from .helpers import open_template, settle, snapshot

pytestmark = pytest.mark.qt


def drop_on(widget, mime, pos: QPoint) -> QDropEvent:
    """Deliver a drag (enter, move, drop) with ``mime`` to ``widget`` at ``pos``, as Qt would."""
    actions, buttons, mods = Qt.DropAction.CopyAction, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier
    enter = QDragEnterEvent(pos, actions, mime, buttons, mods)
    QApplication.sendEvent(widget, enter)
    QApplication.sendEvent(widget, QDragMoveEvent(pos, actions, mime, buttons, mods))
    drop = QDropEvent(QPointF(pos), actions, mime, buttons, mods, QEvent.Type.Drop)
    QApplication.sendEvent(widget, drop)
    return drop


def test_dragging_a_layer_from_the_palette_creates_that_node_where_it_is_dropped(window):
    before = set(window.controller.graph.nodes)
    item = window.layers.item("Conv2d")
    mime = window.layers.tree.mimeData([item])  # the payload a real drag from the palette carries
    viewport = window.canvas.viewport()
    drop = drop_on(viewport, mime, viewport.rect().center())
    assert drop.isAccepted()
    added = set(window.controller.graph.nodes) - before
    assert len(added) == 1
    node = window.controller.graph.nodes[added.pop()]
    assert node.type == "Conv2d"
    centre = window.canvas.mapToScene(viewport.rect().center())
    assert abs(node.position[0] - centre.x()) < 200 and abs(node.position[1] - centre.y()) < 60
    assert window.controller.selection == [node.id]
    assert window.action["undo"].isEnabled()


def test_palette_search_filters_and_enter_places_the_first_match(window):
    window.layers.search.setText("depthwise conv")
    assert window.layers.visible_types() == ["Conv2d"]
    window.layers.search.setText("pool")
    # the pools, the reductions that pool over chosen dims (x.mean((2, 3))), and Subtract, whose doc
    # names PoolFormer's pool(x) - x
    assert set(window.layers.visible_types()) == {"MaxPool2d", "AvgPool2d", "AvgPool1d", "BlurPool2d", "AdaptiveAvgPool2d",
                                                  "Mean", "Sum", "Amax", "Subtract"}
    window.layers.search.setText("batchnorm2")
    window.layers.search.returnPressed.emit()
    assert window.controller.graph.nodes[window.controller.selection[0]].type == "BatchNorm2d"


EDIT_COMMANDS = ["cut", "paste", "duplicate", "delete", "auto_layout"]


@pytest.mark.parametrize("command", EDIT_COMMANDS)
def test_every_edit_command_is_undone_and_redone_through_the_actions(window, command):
    open_template(window, "lenet5")
    ids = ["conv2", "tanh2"]
    window.controller.select(ids)
    if command == "paste":
        window.action["copy"].trigger()
        window.controller.select(ids)
    before = snapshot(window)
    window.action[command].trigger()
    after = snapshot(window)
    assert after != before, f"{command} changed nothing"
    assert window.isWindowModified()
    window.action["undo"].trigger()
    assert snapshot(window) == before
    assert not window.isWindowModified()  # back to the state as opened
    window.action["redo"].trigger()
    assert snapshot(window) == after


def test_copy_and_select_all_do_not_touch_the_graph_or_the_history(window):
    open_template(window, "lenet5")
    before = snapshot(window)
    window.action["select_all"].trigger()
    assert set(window.controller.selection) == set(window.controller.graph.nodes)
    window.action["copy"].trigger()
    assert snapshot(window) == before
    assert window.controller.undo_stack.count() == 0
    assert "Input" in QApplication.clipboard().text()


def test_an_inspector_edit_changes_the_model_the_shapes_and_the_summary(window):
    open_template(window, "lenet5")
    window.controller.select(["conv1"])
    assert window.inspector.node_id == "conv1"
    window.inspector.editors["out_channels"].field.setValue(8)  # committed like Enter in the spin box
    assert window.controller.graph.nodes["conv1"].params["out_channels"] == 8
    settle(window)
    rows = {r.id: r for r in window.summary.model.rows}
    assert rows["conv1"].shape[1:] == (8, 28, 28)
    assert rows["conv1"].params == 8 * 1 * 5 * 5 + 8
    assert rows["conv2"].params == 16 * 8 * 5 * 5 + 16  # the next layer follows the new channel count
    assert window.inspector.shape_label.text() == "8x28x28"
    window.action["undo"].trigger()
    assert window.inspector.editors["out_channels"].value() == 6  # the inspector follows undo


def test_an_invalid_inspector_value_is_refused_with_the_reason_and_the_model_is_unchanged(window):
    open_template(window, "lenet5")
    window.controller.select(["conv1"])
    before = snapshot(window)
    editor = window.inspector.editors["kernel_size"]
    editor.field.setText("0, 5")
    editor.field.editingFinished.emit()
    row = window.inspector.rows["kernel_size"]
    assert not row.error.isHidden()
    assert "kernel_size must be >= 1, got 0" in row.error.text()
    assert snapshot(window) == before
    assert window.controller.undo_stack.count() == 0
    editor.field.setText("3x3")  # a good value clears the reason
    editor.field.editingFinished.emit()
    assert row.error.isHidden()
    assert window.controller.graph.nodes["conv1"].params["kernel_size"] == [3, 3]


def test_the_label_and_the_network_input_are_editable_in_the_inspector(window):
    open_template(window, "mlp")
    first = next(n for n in window.controller.graph.nodes if n != "input" and n != "output")
    window.controller.select([first])
    label = window.inspector.rows["label"].editor
    label.setText("hidden layer")
    label.editingFinished.emit()
    assert window.controller.graph.nodes[first].label == "hidden layer"
    window.controller.select([])
    shape = window.inspector.rows["input_shape"].editor
    shape.setText("3 x two")
    shape.editingFinished.emit()
    assert "not a list of whole numbers" in window.inspector.rows["input_shape"].error.text()
    assert window.controller.graph.input_spec.shape == (64,)
    window.inspector.rows["num_classes"].editor.setValue(7)
    assert window.controller.graph.num_classes == 7
    settle(window)
    assert "invalid" in window.status.validity.text()  # the last Linear still makes 10 logits


def test_the_status_bar_shows_totals_and_validity(window):
    open_template(window, "lenet5")
    assert "61,706 params" in window.status.totals.text()
    assert "FLOPs" in window.status.totals.text()
    assert window.status.validity.text().startswith("✔ valid")
    window.controller.select(["fc1"])
    window.action["delete"].trigger()
    settle(window)
    assert window.status.validity.text().startswith("✖ invalid")
    assert window.status.totals.text() == ""
    assert window.problems.count() >= 1


def test_a_theme_switch_keeps_the_summary_s_analysis(window):
    """The switch redrew the problems in its colours through the whole inference handler, which gave the
    summary the inference's rows (the Output node too) in place of the analysis: 'Analysing...' with no
    analysis coming, until the next edit (seen in the desktop walk)."""
    open_template(window, "lenet5")
    settle(window)
    totals = window.summary.totals.text()
    assert "61,706</b> parameters" in totals
    window.theme_actions["light"].trigger()         # no edit: nothing is analysed again
    QApplication.processEvents()
    assert window.summary.totals.text() == totals
    assert all(row.params is not None for row in window.summary.model.rows)   # figures, not KnownRow dashes


def test_clicking_a_problem_selects_its_node(window):
    open_template(window, "lenet5")
    window.controller.select(["fc2"])
    window.action["delete"].trigger()
    settle(window)
    items = [window.problems.list.item(i) for i in range(window.problems.count())]
    assert items[0].text() == "tanh4.in: input 'in' is not connected"  # errors before warnings
    window.problems.list.itemClicked.emit(items[0])
    assert window.controller.selection == ["tanh4"]
    assert window.inspector.node_id == "tanh4"


def test_a_selection_saved_as_a_block_is_in_the_palette_and_drops_as_a_copy(window, prompts, tmp_path):
    open_template(window, "lenet5")
    window.controller.select(["conv2", "tanh2", "pool2"])
    prompts.answer("block_name", "conv stage")
    window.action["save_block"].trigger()
    assert (tmp_path / "blocks" / "conv stage.block.json").is_file()
    item = window.layers.block_item("conv stage")
    assert item is not None
    mime = window.layers.tree.mimeData([item])
    before = set(window.controller.graph.nodes)
    viewport = window.canvas.viewport()
    assert drop_on(viewport, mime, viewport.rect().center()).isAccepted()
    added = set(window.controller.graph.nodes) - before
    assert sorted(window.controller.graph.nodes[i].type for i in added) == ["AvgPool2d", "Conv2d", "Tanh"]
    assert sum(e.src in added and e.dst in added for e in window.controller.graph.edges) == 2
    window.action["undo"].trigger()  # the drop is one undo step
    assert set(window.controller.graph.nodes) == before
    prompts.answer("block_name", "conv stage")  # a second block of the same name is refused
    window.controller.select(["conv1"])
    assert not window.save_block()
    assert "already exists" in prompts.errors[-1]
    window.remove_block("conv stage")
    assert window.layers.block_item("conv stage") is None


def test_double_clicking_a_node_brings_its_parameters_forward(window):
    open_template(window, "lenet5")
    window.docks["inspector"].hide()
    window.canvas.node_activated.emit("conv2")
    assert window.docks["inspector"].isVisible()
    assert window.inspector.node_id == "conv2"


def test_a_selected_block_is_named_in_the_inspector(window):
    open_template(window, "lenet5")
    assert window.controller.group("stem", ["conv1", "tanh1", "pool1"]) is None
    window.controller.select([window.controller.last_group])
    assert window.inspector.header.text() == "Block 'stem' · 3 layers"
    window.controller.select(["conv2", "tanh2"])
    assert window.inspector.header.text() == "2 selected"
