"""Every editor kind of the Inspector driven by real input events, on the network page and on a
node: spin box arrows (clicked where the style draws them) and typing, combo popups chosen with
keys, line edits, check boxes. Setting values in code missed a segfault (the page was rebuilt,
destroying the spin box inside its own mouse handler); these go through the widgets' own handlers.
"""

from __future__ import annotations

import pytest
from PySide6.QtCore import QEvent, Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import (
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QStyle,
    QStyleOptionButton,
    QStyleOptionSpinBox,
    QWidget,
)

from ..helpers import open_template, settle

pytestmark = pytest.mark.qt

LEFT, NO_MODS = Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier


def flush() -> None:
    """Let deferred work (rebuilds, deleteLater) run, as the event loop would."""
    for _ in range(3):
        QApplication.processEvents()
        QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)


def click_arrow(box: QAbstractSpinBox, up: bool = True) -> None:
    """A real click on the spin box's up (or down) arrow, where the style puts it."""
    option = QStyleOptionSpinBox()
    box.initStyleOption(option)
    part = QStyle.SubControl.SC_SpinBoxUp if up else QStyle.SubControl.SC_SpinBoxDown
    rect = box.style().subControlRect(QStyle.ComplexControl.CC_SpinBox, option, part, box)
    assert rect.isValid(), "the style draws no arrow"
    QTest.mouseClick(box, LEFT, NO_MODS, rect.center())
    flush()


def type_into(widget: QWidget, text: str) -> None:
    """Click into the field, select what is there, type ``text`` and press Enter."""
    QTest.mouseClick(widget, LEFT, NO_MODS, widget.rect().center())
    QTest.keyClick(widget, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    QTest.keyClicks(widget, text)
    QTest.keyClick(widget, Qt.Key.Key_Return)
    flush()


def choose_in_popup(combo: QComboBox, text: str) -> None:
    """Open the combo's popup with a click, walk to ``text`` with the arrow keys, press Enter."""
    QTest.mouseClick(combo, LEFT, NO_MODS, combo.rect().center())
    flush()
    view = combo.view()
    assert view.isVisible(), "the popup did not open"
    target = combo.findText(text)
    assert target >= 0, f"{text} is not a choice"
    key = Qt.Key.Key_Down if target > view.currentIndex().row() else Qt.Key.Key_Up
    for _ in range(abs(target - view.currentIndex().row())):
        QTest.keyClick(view, key)
    QTest.keyClick(view, Qt.Key.Key_Return)
    flush()


def network_field(window, name: str) -> QWidget:
    return window.inspector.rows[name].editor


def node_field(window, name: str) -> QWidget:
    return window.inspector.editors[name].field


@pytest.fixture
def net(window):
    open_template(window, "lenet5")
    window.controller.select([])
    flush()
    assert window.inspector.node_id is None
    return window


@pytest.mark.slow
def test_the_classes_arrows_change_the_class_count_each_click(net):
    graph = net.controller.graph
    click_arrow(network_field(net, "num_classes"))
    assert graph.num_classes == 11
    click_arrow(network_field(net, "num_classes"))  # the field shown now, after the first edit
    assert graph.num_classes == 12
    click_arrow(network_field(net, "num_classes"), up=False)
    assert graph.num_classes == 11
    assert net.controller.undo_stack.count() == 3
    net.action["undo"].trigger()
    flush()
    assert graph.num_classes == 12 and network_field(net, "num_classes").value() == 12


def test_typing_a_class_count_and_enter_applies_it(net):
    type_into(network_field(net, "num_classes"), "12")
    assert net.controller.graph.num_classes == 12
    assert network_field(net, "num_classes").value() == 12


def test_the_input_dtype_is_chosen_in_its_popup_with_the_keys(net):
    choose_in_popup(network_field(net, "dtype"), "float16")
    assert net.controller.graph.input_spec.dtype == "float16"
    choose_in_popup(network_field(net, "dtype"), "float32")
    assert net.controller.graph.input_spec.dtype == "float32"


def test_the_input_shape_is_typed_and_a_bad_one_is_refused_under_the_field(net, capfd):
    type_into(network_field(net, "input_shape"), "1, 32, 32")
    assert net.controller.graph.input_spec.shape == (1, 32, 32)
    row = net.inspector.rows["input_shape"]
    assert row.error.isHidden()
    type_into(network_field(net, "input_shape"), "1 x two")
    assert "not a list of whole numbers" in row.error.text() and not row.error.isHidden()
    assert net.controller.graph.input_spec.shape == (1, 32, 32)
    assert "already deleted" not in capfd.readouterr().err


@pytest.fixture
def block(window):
    """LeNet-5 with a transformer layer added: int, float, choice and bool editors on one node."""
    open_template(window, "lenet5")
    assert window.controller.add_node("TransformerEncoderLayer", (0.0, 0.0)) is None
    node_id = window.controller.last_added
    window.controller.select([node_id])
    flush()
    assert window.inspector.node_id == node_id
    return window, window.controller.graph.nodes[node_id]


def test_a_node_s_int_field_takes_arrow_clicks_and_typing(block):
    window, node = block
    click_arrow(node_field(window, "nhead"))
    assert node.params["nhead"] == 5
    type_into(node_field(window, "dim_feedforward"), "256")
    assert node.params["dim_feedforward"] == 256
    click_arrow(node_field(window, "dim_feedforward"), up=False)
    assert node.params["dim_feedforward"] == 255


def test_a_node_s_float_choice_and_bool_fields_take_real_input(block):
    window, node = block
    type_into(node_field(window, "dropout"), "0.25")
    assert node.params["dropout"] == pytest.approx(0.25)
    type_into(node_field(window, "layer_norm_eps"), "1e-06")
    assert node.params["layer_norm_eps"] == pytest.approx(1e-6)
    choose_in_popup(node_field(window, "activation"), "relu")
    assert node.params["activation"] == "relu"
    box = node_field(window, "norm_first")
    option = QStyleOptionButton()
    box.initStyleOption(option)
    hit = box.style().subElementRect(QStyle.SubElement.SE_CheckBoxClickRect, option, box)
    QTest.mouseClick(box, LEFT, NO_MODS, hit.center())
    flush()
    assert node.params["norm_first"] is False
    QTest.keyClick(box, Qt.Key.Key_Space)
    flush()
    assert node.params["norm_first"] is True


def test_a_node_s_list_field_and_label_take_typing_and_refuse_bad_values(window):
    open_template(window, "lenet5")
    window.controller.select(["conv1"])
    flush()
    node = window.controller.graph.nodes["conv1"]
    type_into(node_field(window, "kernel_size"), "3x3")
    assert node.params["kernel_size"] == [3, 3]
    type_into(node_field(window, "kernel_size"), "0, 5")
    row = window.inspector.rows["kernel_size"]
    assert "kernel_size must be >= 1, got 0" in row.error.text() and not row.error.isHidden()
    assert node.params["kernel_size"] == [3, 3]
    click_arrow(node_field(window, "out_channels"))
    assert node.params["out_channels"] == 7
    type_into(window.inspector.rows["label"].editor, "first conv")
    assert node.label == "first conv"
    settle(window)
    assert "first conv" in window.inspector.header.text()


def test_an_optional_int_steps_from_auto_to_a_number_with_its_arrow(window):
    open_template(window, "lenet5")
    window.controller.select(["fc1"])
    flush()
    node = window.controller.graph.nodes["fc1"]
    assert node.params.get("in_features") is None
    field = node_field(window, "in_features")
    assert field.text() == "auto"
    click_arrow(field)
    assert node.params["in_features"] == 1
    click_arrow(node_field(window, "in_features"), up=False)
    assert node.params.get("in_features") is None


def test_ctrl_z_in_a_committed_field_undoes_the_graph_edit_and_ctrl_y_redoes_it(window):
    open_template(window, "lenet5")
    window.activateWindow()
    window.controller.select(["conv1"])
    flush()
    node = window.controller.graph.nodes["conv1"]
    type_into(node_field(window, "out_channels"), "8")
    assert node.params["out_channels"] == 8
    field = node_field(window, "out_channels")
    assert field.hasFocus() or field.lineEdit().hasFocus()
    QTest.keyClick(field.lineEdit(), Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    flush()
    assert node.params["out_channels"] == 6                    # the graph's undo, not the field's own
    assert node_field(window, "out_channels").value() == 6
    QTest.keyClick(node_field(window, "out_channels").lineEdit(), Qt.Key.Key_Y, Qt.KeyboardModifier.ControlModifier)
    flush()
    assert node.params["out_channels"] == 8
    label = window.inspector.rows["label"].editor              # typing not yet committed: the field's own undo
    QTest.mouseClick(label, LEFT, NO_MODS, label.rect().center())
    QTest.keyClicks(label, "abc")
    QTest.keyClick(label, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    flush()
    assert node.params["out_channels"] == 8 and label.text() != "abc"
