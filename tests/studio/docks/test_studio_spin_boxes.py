"""Spin boxes refuse what cannot be taken with the reason, where they used to change it silently
(issue 22: -5 became 5, 0 classes became 1000, an 11th digit vanished). Typed with real keys."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QSpinBox

from graph_editor.model.serialize import load_graph
from studio.training.devices import cpu_device
from studio.training.train_dialog import TrainDialog

from ..helpers import open_template

pytestmark = pytest.mark.qt
ROOT = Path(__file__).resolve().parents[3]


def type_into(box: QSpinBox, text: str) -> None:
    box.setFocus()
    box.selectAll()
    QTest.keyClicks(box, text)
    QTest.keyClick(box, Qt.Key.Key_Return)
    QApplication.processEvents()


def test_the_classes_field_refuses_zero_and_too_many_digits_with_the_reason(window):
    open_template(window, "lenet5")
    window.controller.select([])
    row = window.inspector.rows["num_classes"]
    box = row.editor
    type_into(box, "0")
    assert window.controller.graph.num_classes == 10 and box.value() == 10
    assert row.error.isVisibleTo(window) and row.error.text() == "0 refused: classes must be at least 1 (kept 10)"
    type_into(box, "12345678901")
    assert row.error.text() == "12345678901 refused: classes must be at most 1000000 (kept 10)"
    type_into(box, "12")
    assert window.controller.graph.num_classes == 12 and not row.error.isVisibleTo(window)


def test_a_layer_s_int_parameter_refuses_a_negative_number_instead_of_dropping_its_sign(window):
    open_template(window, "lenet5")
    node = next(i for i, n in window.controller.graph.nodes.items() if n.type == "Linear")
    window.controller.select([node])
    before = window.controller.graph.nodes[node].params["out_features"]
    editor = window.inspector.editors["out_features"]
    type_into(editor.field, "-5")
    assert window.controller.graph.nodes[node].params["out_features"] == before   # not 5
    row = window.inspector.rows["out_features"]
    assert row.error.text() == f"-5 refused: out_features must be at least 1 (kept {before})"


def test_the_train_dialog_passes_a_negative_count_to_the_spec_checks_which_name_it(qtbot):
    dialog = TrainDialog(load_graph(ROOT / "assets/templates/digits_cnn.graph.json"), [cpu_device()])
    qtbot.addWidget(dialog)
    dialog.show()
    type_into(dialog.form.editors["train.epochs"], "-5")
    assert "train.epochs: must be positive, got -5" in dialog.problem_list()
    assert not dialog.start_button.isEnabled()
    type_into(dialog.form.editors["train.epochs"], "12345678901")
    assert any(p.startswith("12345678901 refused: train.epochs must be at most") for p in dialog.problem_list())
    QTest.keyClicks(dialog.form.editors["train.epochs"], "3")      # typing again takes the refusal back
    assert not any("refused" in p for p in dialog.problem_list())
