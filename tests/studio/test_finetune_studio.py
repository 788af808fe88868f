"""Fine-tuning and sweep variables as a user sets them: blocks clicked on the canvas, frozen with
Ctrl+Shift+F, the head replaced with Ctrl+Shift+H, a learning-rate multiplier from the Graph menu, a
sweep range typed in the Inspector; each drawn on the canvas, undone with Ctrl+Z, and written into
the run spec the Train dialog sends."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from graph_editor.model.finetune import plan_of
from graph_editor.model.sweep_vars import variables
from studio.training.devices import cpu_device
from studio.training.train_dialog import TrainDialog

from .helpers import open_template

pytestmark = pytest.mark.qt
CTRL_SHIFT = Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier


def click_item(window, key: str) -> None:
    scene = window.canvas.graph_scene
    item = scene.boxes.get(key) or scene.nodes[key]
    window.canvas.ensureVisible(item)
    QApplication.processEvents()
    point = window.canvas.mapFromScene(item.sceneBoundingRect().center())
    QTest.mouseClick(window.canvas.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, point)
    assert window.controller.selection == [key]


def marks(window) -> dict[str, list[str]]:
    return window.canvas.graph_scene.marks.marked()


def test_freeze_scale_and_replace_head_are_drawn_undone_and_sent_to_the_run(window, prompts, qtbot, tmp_path):
    window.resize(1440, 900)
    open_template(window, "resnet18_cifar")
    window.activateWindow()
    click_item(window, "g_layer1")
    QTest.keyClick(window, Qt.Key.Key_F, CTRL_SHIFT)
    assert plan_of(window.controller.graph).frozen == ["g_layer1"]
    assert marks(window)["g_layer1"] == ["❄ frozen"]
    QTest.keyClick(window, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)          # undone
    assert plan_of(window.controller.graph).is_empty() and "g_layer1" not in marks(window)
    QTest.keyClick(window, Qt.Key.Key_F, CTRL_SHIFT)
    click_item(window, "g_layer2")
    prompts.answer("number", 0.1)
    window.action["lr_scale"].trigger()
    assert marks(window)["g_layer2"] == ["lr ×0.1"]
    prompts.answer("number", 5)
    QTest.keyClick(window, Qt.Key.Key_H, CTRL_SHIFT)
    graph = window.controller.graph
    assert graph.num_classes == 5 and graph.nodes["fc"].params["out_features"] == 5
    assert marks(window)["g_head"] == ["↺ new head"]
    assert prompts.asked("number") == [("Learning-rate multiplier", 1.0), ("Replace head", 10)]
    window.live.analyze_now()
    assert "trainable" in window.summary.totals.text() and \
        window.live.analysis.trainable_params < window.live.analysis.total_params - 140_000   # layer1 frozen
    window.grab().save(str(tmp_path / "finetune.png"))
    d = TrainDialog(graph, [cpu_device()])
    qtbot.addWidget(d)
    model = d.spec()["model"]
    assert (model["frozen"], model["lr_scale"], model["reinit"]) == (["g_layer1"], ["g_layer2=0.1"], ["fc"])
    assert d.finetune_label.text() == ("from scratch; frozen: g_layer1; learning rate: g_layer2 x0.1; "
                                       "re-initialised: fc")
    d.wait_preview()
    d.close()


def test_a_sweep_range_typed_in_the_inspector_is_drawn_and_checked(window, qtbot):
    window.resize(1440, 900)
    open_template(window, "digits_cnn")
    window.activateWindow()
    click_item(window, "conv1")
    line = window.inspector.sweep_rows["out_channels"].editor
    # the hint fits the Inspector at its default width (at 1440x900 it read "not swept: e.g. 16..64:step16 o…")
    assert line.fontMetrics().horizontalAdvance(line.placeholderText()) <= line.contentsRect().width() - 8
    QTest.mouseClick(line, Qt.MouseButton.LeftButton)
    QTest.keyClicks(line, "16-64")
    QTest.keyClick(line, Qt.Key.Key_Return)
    assert "'16-64' is not a range" in window.inspector.sweep_rows["out_channels"].error.text()
    assert variables(window.controller.graph) == {}
    line.selectAll()
    QTest.keyClicks(line, "16..64:step16")
    QTest.keyClick(line, Qt.Key.Key_Return)
    assert variables(window.controller.graph) == {"conv1.out_channels": "16..64:step16"}
    assert marks(window)["conv1"] == ["⇄ out_channels 16..64:step16"]
    window.action["undo"].trigger()
    assert "conv1" not in marks(window)


def test_a_block_s_repeat_count_and_its_sweep_are_typed_in_the_inspector(window, qtbot, tmp_path):
    window.resize(1440, 900)
    open_template(window, "resnet18_cifar")
    window.activateWindow()
    assert window.controller.set_collapsed("g_layer1", False) is None
    click_item(window, "g_layer1_1")
    spin = window.inspector.block_rows["repeat"].editor
    QTest.mouseClick(spin, Qt.MouseButton.LeftButton)
    spin.selectAll()
    QTest.keyClicks(spin, "3")
    QTest.keyClick(spin, Qt.Key.Key_Return)
    assert window.controller.graph.groups["g_layer1_1"].repeat == 3
    line = window.inspector.block_rows["sweep"].editor
    QTest.mouseClick(line, Qt.MouseButton.LeftButton)
    QTest.keyClicks(line, "1..4")
    QTest.keyClick(line, Qt.Key.Key_Return)
    assert variables(window.controller.graph) == {"g_layer1_1.repeat": "1..4"}
    assert marks(window)["g_layer1_1"] == ["×3", "⇄ repeat 1..4"]
    # the summary counts the two more copies (BasicBlocks of 64 channels) once the live analysis catches up
    qtbot.waitUntil(lambda: "11,321,930</b> parameters" in window.summary.totals.text(), timeout=30_000)
    window.grab().save(str(tmp_path / "repeat_inspector.png"))
    window.action["undo"].trigger()
    window.action["undo"].trigger()
    assert window.controller.graph.groups["g_layer1_1"].repeat == 1 and "g_layer1_1" not in marks(window)
