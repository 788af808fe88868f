"""Confusion matrix: per-class metrics against hand-computed values, and cell clicks."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QLabel

from studio.training.confusion import ConfusionPanel, cell_indices, per_class_metrics
from studio.training.plot_theme import DARK, LIGHT, apply_plot_theme


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
    panel.set_predictions(np.random.default_rng(0).random((6, 8, 8)), true, pred, "last checkpoint, epoch 1")
    panel.show_cell(1, 0)
    assert panel.gallery.title() == "true one, predicted zero (last checkpoint, epoch 1): 2 samples"
    panel.set_matrix(m, ["zero", "one", "two"], "epoch 2")       # the next epoch: those predictions are old
    assert panel.gallery.shown_indices() == [3, 4]               # what is shown stays, titled with its source
    with qtbot.waitSignal(panel.samples_requested) as sig:       # a click asks for the newest ones
        panel.show_cell(1, 0)
    assert sig.args == [1, 0] and "Loading" in panel.gallery.title()


def test_matrix_and_gallery_switch_theme_live(qtbot):
    panel = ConfusionPanel()
    qtbot.addWidget(panel)
    panel.resize(500, 800)
    panel.show()
    true, pred = np.array([0, 0, 1, 1]), np.array([0, 1, 1, 1])
    panel.set_matrix(np.array([[1, 1, 0], [0, 2, 0], [0, 0, 0]]), ["a", "b", "c"])
    panel.set_predictions(np.zeros((4, 4, 4)), true, pred)
    panel.show_cell(0, 1)
    view = panel.matrix_view

    def pixel(cell: tuple[int, int] | None = None) -> str:
        x, y = (2.0, 2.0)
        if cell:   # near the cell's corner, away from its count
            rect = view.cell_rect(*cell)
            x, y = rect.left() + rect.width() * 0.15, rect.top() + rect.height() * 0.15
        return view.grab().toImage().pixelColor(int(x), int(y)).name()

    empty, error = (2, 0), (0, 1)   # a cell counting nothing (no count drawn) and a shaded error cell
    assert (pixel(), pixel(empty)) == ("#ffffff", "#ffffff")
    misses = [w for w in panel.gallery.findChildren(QLabel) if "pred b" in w.text()]
    assert misses and all("#b3261e" in w.styleSheet() for w in misses)
    apply_plot_theme(panel, "dark")
    assert (pixel(), pixel(empty)) == (DARK.background, DARK.cell)
    red = QColor(pixel(error))
    assert red.red() > 2 * red.green() and red.lightness() < 128   # a red shade on the dark cell
    assert all(DARK.miss in w.styleSheet() for w in misses)
    apply_plot_theme(panel, "light")
    assert pixel(empty) == "#ffffff" and all(LIGHT.miss in w.styleSheet() for w in misses)


def test_a_flat_sample_shows_its_own_level_not_black(qtbot):
    from studio.training.confusion import image_to_pixmap

    assert image_to_pixmap(np.full((1, 4, 4), 200, np.uint8), 8).toImage().pixelColor(2, 2).red() == 200
    assert image_to_pixmap(np.zeros((4, 4), np.float32), 8).toImage().pixelColor(2, 2).red() == 127
    ramp = image_to_pixmap(np.arange(16, dtype=np.uint8).reshape(4, 4), 4).toImage()
    assert ramp.pixelColor(0, 0).red() == 0 and ramp.pixelColor(3, 3).red() == 255   # varied: stretched


def test_a_run_without_validation_says_no_matrix_is_coming(qtbot, tmp_path):
    """Retrained on train+val (Experiments), a run has no validation split: its finished dashboard said
    "The confusion matrix appears after the first epoch" for good."""
    from studio.training.dashboard import TrainingDashboard
    from studio.training.session import TrainingSession
    from trainer.protocol import events as ev

    dash = TrainingDashboard()
    qtbot.addWidget(dash)
    session = TrainingSession(dash, f"sqlite:///{tmp_path / 'runs.sqlite'}", tmp_path)
    dash.begin_run("s trial 3 (train+val)", 100)
    assert "appears" in dash.confusion.matrix_view.empty_text
    session.spec = {"data": {"dataset": "digits", "val_fraction": 0.0}}
    session.bridge.finished.emit(ev.Finished(run_id=7, status="completed", test_accuracy=0.98))
    assert dash.confusion.matrix_view.empty_text == ("No confusion matrix: this run trained\n"
                                                     "on train+val, with no validation split")
    dash.resize(1300, 800)
    dash.show()
    dash.confusion.grab().save(str(tmp_path / "no_matrix.png"))
    dash.begin_run("next", 100)                     # the next run waits for its matrix again
    assert "appears" in dash.confusion.matrix_view.empty_text
