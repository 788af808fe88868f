"""Confusion matrix: per-class metrics against hand-computed values, and cell clicks."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QPoint, Qt

from studio.training.confusion import ConfusionPanel, cell_indices, per_class_metrics


def test_per_class_metrics_by_hand():
    m = np.array([[5, 1, 0], [2, 3, 0], [0, 0, 0]])
    a, b, c = per_class_metrics(m, ["a", "b", "c"])
    assert (a.precision, a.recall, a.support) == (pytest.approx(5 / 7), pytest.approx(5 / 6), 6)
    assert b.f1 == pytest.approx(2 * 0.75 * 0.6 / 1.35)
    assert (c.precision, c.recall, c.f1, c.support) == (0.0, 0.0, 0.0, 0)
    with pytest.raises(ValueError, match="square"):
        per_class_metrics(np.zeros((2, 3)), [])


def test_cell_indices():
    assert cell_indices(np.array([0, 1, 1, 2]), np.array([0, 2, 2, 2]), 1, 2).tolist() == [1, 2]


def test_clicking_a_cell_shows_its_samples(qtbot):
    panel = ConfusionPanel()
    qtbot.addWidget(panel)
    panel.resize(500, 800)
    panel.show()
    true = np.array([0, 0, 1, 1, 1, 2])
    pred = np.array([0, 1, 1, 0, 0, 2])
    m = np.zeros((3, 3), int)
    np.add.at(m, (true, pred), 1)
    panel.set_matrix(m, ["zero", "one", "two"], "epoch 1")
    assert panel.metrics.rowCount() == 3 and panel.metrics.item(1, 4).text() == "3"
    with qtbot.waitSignal(panel.samples_requested) as sig:  # no predictions yet: asks for them
        x, y = panel.matrix_view.cell_center(1, 0)
        qtbot.mouseClick(panel.matrix_view, Qt.MouseButton.LeftButton, pos=QPoint(int(x), int(y)))
    assert sig.args == [1, 0] and "Loading" in panel.gallery.title()
    panel.set_predictions(np.random.default_rng(0).random((6, 8, 8)), true, pred)
    qtbot.mouseClick(panel.matrix_view, Qt.MouseButton.LeftButton, pos=QPoint(int(x), int(y)))
    assert panel.gallery.shown_indices() == [3, 4]
    assert panel.gallery.title() == "true one, predicted zero: 2 samples"
