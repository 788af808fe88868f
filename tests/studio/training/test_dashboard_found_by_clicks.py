"""The training dashboard as a user found it with the mouse (issue 22), driven by real events."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QEvent, QPoint, QPointF, Qt
from PySide6.QtGui import QMouseEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QVBoxLayout, QWidget

from studio.training.dashboard import TrainingDashboard

ROOT = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.qt


def _dashboard(qtbot) -> tuple[QWidget, TrainingDashboard, QWidget]:
    host = QWidget()
    dash, other = TrainingDashboard(), QWidget()
    layout = QVBoxLayout(host)
    layout.addWidget(dash, 1)
    layout.addWidget(other)
    other.setMinimumHeight(60)
    qtbot.addWidget(host)
    host.resize(1280, 760)
    host.show()
    qtbot.waitExposed(host)
    dash.begin_run("digits_cnn  ·  run 1  ·  cpu", 100, 1e-3)
    for step in range(1, 60):
        dash.add_point("loss", "train", step, 2.0 / step)
    dash.flush(everything=True)
    return host, dash, other


def _move(widget, point: QPoint) -> None:
    """A mouse move event straight to ``widget`` (QTest's window-level moves lose track of which window
    is under the pointer once an earlier test's window is gone, offscreen)."""
    pos = QPointF(point)
    QApplication.sendEvent(widget, QMouseEvent(QEvent.Type.MouseMove, pos, widget.mapToGlobal(pos),
                                                Qt.MouseButton.NoButton, Qt.MouseButton.NoButton,
                                                Qt.KeyboardModifier.NoModifier))


def test_the_loss_crosshair_goes_when_the_mouse_leaves_and_is_gone_in_the_next_run(qtbot):
    host, dash, other = _dashboard(qtbot)
    plot = dash.plots["loss"]
    centre = plot.viewport().rect().center()
    _move(plot.viewport(), centre)      # one move: none left on its way through the rate limiter
    qtbot.waitUntil(plot.crosshair.isVisible, timeout=5000)
    QApplication.sendEvent(plot, QEvent(QEvent.Type.Leave))     # the pointer went to another widget
    assert not plot.crosshair.isVisible()
    _move(plot.viewport(), centre)
    qtbot.waitUntil(plot.crosshair.isVisible, timeout=2000)
    dash.begin_run("digits_cnn  ·  run 2  ·  cpu", 100, 1e-3)   # the next run starts clean
    assert not plot.crosshair.isVisible()


def test_the_memory_bar_draws_a_small_peak_as_a_sliver_of_its_budget(qtbot, tmp_path):
    from graph_editor.model.units import MiB
    from studio.training.memory_bar import MemoryPanel
    from studio.training.memory_prediction import MemoryFigures

    panel = MemoryPanel()
    qtbot.addWidget(panel)
    panel.resize(520, 160)
    panel.show()
    parts = {"weights": MiB, "gradients": MiB, "optimizer": 2 * MiB, "activations": 3 * MiB}
    panel.set_figures(MemoryFigures(7 * MiB, parts, int(23.5 * 1024 * MiB), "RAM", 64, largest_batch=4096))
    rects = panel.bar.band_rects()
    drawn = sum(r.width() for _, r in rects)
    assert 0 < drawn < panel.bar.width() * 0.1        # 7 MiB of 23.5 GiB: a sliver, not the bar full
    assert all(r.width() >= 3 for _, r in rects if r.width())   # each part still seen
    panel.grab().save(str(tmp_path / "memory_bar_small.png"))


@pytest.mark.slow
def test_a_followed_run_shows_its_lr_and_predicted_line_and_the_plot_says_what_rss_is(qtbot, tmp_path):
    import json

    from studio.training.follow import RunFollower
    from trainer.store.runs import RunStore

    graph = json.loads((ROOT / "assets/templates/digits_cnn.graph.json").read_text())
    spec = {"name": "bg", "optim": {"lr": 0.004}, "train": {"epochs": 2, "batch_size": 32}, "device": "cpu",
            "data": {"dataset": "digits"}, "model": {"graph": "digits_cnn.graph.json"}}
    store = RunStore(f"sqlite:///{tmp_path / 'runs.sqlite'}")
    rid = store.create_run(name="bg", spec=spec, graph=graph, graph_hash="0" * 64, device="cpu", params=1)
    store.add_metrics(rid, [(s, name, v) for s in (5, 10) for name, v in
                            (("train/loss", 2.0 / s), ("lr", 0.004 * s / 10), ("memory/rss", 9e8))])
    dash = TrainingDashboard()
    qtbot.addWidget(dash)
    dash.resize(1280, 760)
    dash.show()
    follower = RunFollower(store, dash, rid, interval_ms=100)
    memory = dash.plots["memory"]
    qtbot.waitUntil(lambda: memory.level("predicted") is not None, timeout=60_000)
    assert memory.level("predicted").label.toPlainText().startswith("predicted tensors ")
    assert "whole" in memory.toolTip() or "everything the worker process holds" in memory.toolTip()
    dash.flush(everything=True)
    assert "lr" in dash.plots["lr"].curve_names() and abs(dash.lr_box.value() - 0.004) < 1e-9
    follower.stop()
    store.close()


def test_the_samples_of_a_cell_fit_the_gallery_s_width_without_clipping(qtbot):
    import numpy as np

    from studio.training.confusion import ConfusionPanel

    panel = ConfusionPanel()
    qtbot.addWidget(panel)
    panel.resize(360, 700)
    panel.show()
    qtbot.waitExposed(panel)
    true, pred = np.array([1] * 12 + [0]), np.array([0] * 12 + [0])
    panel.set_matrix(np.array([[1, 0], [12, 0]]), ["zero", "one"])
    panel.set_predictions(np.random.default_rng(0).random((13, 8, 8)), true, pred)
    view = panel.matrix_view
    x, y = view.cell_center(1, 0)
    QTest.mouseClick(view, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, QPoint(int(x), int(y)))
    gallery = panel.gallery
    assert len(gallery.shown_indices()) == 12
    QApplication.processEvents()
    assert gallery.widget().minimumSizeHint().width() <= gallery.viewport().width(), (gallery.widget().minimumSizeHint(), gallery.viewport().width())
    assert not gallery.horizontalScrollBar().isVisible()     # every tile inside the width, none cut off
    panel.resize(900, 700)                                   # wider: more tiles to a row
    QApplication.processEvents()
    assert not gallery.horizontalScrollBar().isVisible()


def test_the_lr_box_reads_no_rate_before_a_run_and_set_lr_sends_only_a_positive_one(qtbot, tmp_path):
    dash = TrainingDashboard()
    qtbot.addWidget(dash)
    dash.resize(1280, 760)
    dash.show()
    box = dash.lr_box
    assert box.text() == "\u2014" and not box.isEnabled() and not dash.lr_button.isEnabled()  # read 0.000001
    dash.grab().save(str(tmp_path / "dashboard_before_a_run.png"))
    sent: list[float] = []
    dash.lr_requested.connect(sent.append)
    dash.begin_run("digits_cnn  ·  run 1  ·  cpu", 100, 3e-3)
    assert box.text() == "0.003000" and dash.lr_button.isEnabled()
    box.setFocus()
    box.selectAll()
    QTest.keyClicks(box, "0.0005")
    QTest.mouseClick(dash.lr_button, Qt.MouseButton.LeftButton)
    assert sent == [pytest.approx(5e-4)]
    box.selectAll()
    QTest.keyClicks(box, "0")
    QTest.keyClick(box, Qt.Key.Key_Return)
    assert box.value() == 0 and not dash.lr_button.isEnabled()     # no rate: nothing to send
    dash.begin_run("bg  ·  run 2  ·  cpu", 100, None)              # a followed run: its rate unknown here
    assert box.text() == "\u2014"


@pytest.mark.slow
def test_a_followed_run_s_memory_rows_stored_a_poll_late_are_still_drawn(qtbot, tmp_path):
    """The worker stores a step's memory sample after that step's metrics (or a later step's): the follower
    read on from the last step it showed and dropped such rows (2 of 6 in a real 3-epoch run; all of them
    when every sample comes late: an empty memory plot beside a loss curve)."""
    from studio.training.follow import RunFollower
    from trainer.store.runs import RunStore

    store = RunStore(f"sqlite:///{tmp_path / 'runs.sqlite'}")
    rid = store.create_run(name="bg", spec={"train": {"epochs": 1}}, graph={}, graph_hash="0" * 64, device="cpu",
                           params=1)
    dash = TrainingDashboard(refresh_ms=0)
    qtbot.addWidget(dash)
    follower = RunFollower(store, dash, rid, interval_ms=3_600_000)   # polled here, by hand
    for step in (5, 10, 15):
        store.add_metrics(rid, [(step, "train/loss", 1.0 / step), (step, "lr", 0.01), (step, "samples_per_s", 900.0)])
        follower.poll()
        store.add_metrics(rid, [(step, "memory/rss", 9e8 + step)])        # the step's sample, a poll late
    follower.poll()
    dash.flush(everything=True)
    memory = dash.plots["memory"]
    assert "rss" in memory.curve_names() and len(memory.buffer("rss")) == 3
    assert len(dash.plots["lr"].buffer("lr")) == len(dash.plots["throughput"].buffer("samples/s")) == 3
    follower.stop()
    store.close()
