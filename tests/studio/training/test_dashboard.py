"""Dashboard behaviour on recorded events: coalesced redraws, compile timer, progress and ETA."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QStyledItemDelegate

from studio.training.dashboard import ProgressClock, TrainingDashboard, format_duration
from trainer.protocol import events as ev

pytestmark = pytest.mark.qt


@pytest.fixture
def dash(qtbot):
    d = TrainingDashboard(refresh_ms=0)  # the test drives the ticks
    qtbot.addWidget(d)
    d.begin_run("run", total_steps=100, lr=0.01)
    return d


def test_points_wait_for_the_tick_and_one_plot_is_drawn_per_tick(dash):
    for step in range(1, 51):
        dash.add_metrics(ev.Metrics(step=step, epoch=1, loss=1 / step, accuracy=step / 50, lr=0.01,
                                    samples_per_s=900.0))
    assert all(p.point_count() == 0 for p in dash.plots.values())
    dash.flush()
    drawn = [k for k, p in dash.plots.items() if p.point_count() and p.curve(p.curve_names()[0]).getData()[0] is not None]
    assert drawn == ["loss"]  # every buffer is filled, only the oldest stale plot redrawn
    assert [len(dash.plots[k].buffer(c)) for k, c in (("accuracy", "train"), ("lr", "lr"))] == [50, 50]
    dash.flush(everything=True)
    assert all(dash.plots[k].curve(c).getData()[0].size == 50 for k, c in
               (("accuracy", "train"), ("lr", "lr"), ("throughput", "samples/s")))
    assert dash.progress.value() == 50


def test_epoch_end_adds_a_row_val_points_and_the_matrix(dash):
    m = np.eye(3, dtype=int) * 5
    sent = ev.PerClass([0.25, 0.5, 0.75], [1.0, 1.0, 1.0], [0.4, 0.667, 0.857], [5, 5, 5])   # not m's own
    dash.end_epoch(ev.EpochEnd(epoch=1, step=10, train_loss=0.5, train_accuracy=0.8, val_loss=0.4, val_accuracy=0.9,
                               lr=0.003, seconds=1.25, confusion=m.tolist(), per_class=sent), ["a", "b", "c"])
    dash.flush(everything=True)
    row = [dash.epochs.item(0, c).text() for c in range(dash.epochs.columnCount())]
    assert row == ["1", "0.5000", "0.8000", "0.4000", "0.9000", "3.0e-03", "1.2"]    # decimals aligned
    # the dashboard shows the per-class figures the worker sent, not its own
    assert [dash.confusion.metrics.item(i, 1).text() for i in range(3)] == ["0.250", "0.500", "0.750"]
    assert dash.confusion.metrics.item(2, 0).text() == "c"
    dash.end_epoch(ev.EpochEnd(epoch=2, step=20, train_loss=3e-5, train_accuracy=1.0, val_loss=0.0, val_accuracy=None,
                               lr=0.001, seconds=1.0))
    row = [dash.epochs.item(1, c).text() for c in range(dash.epochs.columnCount())]
    assert row[1:5] == ["3.0e-05", "1.0000", "0.0000", ""]     # a tiny loss is not shown as 0
    assert dash.plots["accuracy"].buffer("val").y.tolist() == [0.9]
    assert np.array_equal(dash.confusion.matrix_view.matrix(), m)


def test_compiling_label_counts_then_reports(dash, monkeypatch):
    import studio.training.dashboard as mod

    now = [1000.0]
    monkeypatch.setattr(mod.time, "monotonic", lambda: now[0])
    dash.compile_started()
    now[0] += 12.4
    dash.flush()
    assert dash.compile_label.text() == "Compiling... 12 s"
    dash.compile_done(12.4)
    assert dash.compile_label.text() == "compiled in 12.4 s"


def test_a_first_compile_says_so_with_the_graph_it_compiles_and_a_cached_one_its_expected_time(dash, monkeypatch):
    import studio.training.dashboard as mod

    now = [1000.0]
    monkeypatch.setattr(mod.time, "monotonic", lambda: now[0])
    dash.compile_started(first_time=True)
    assert dash.compile_label.text() == "Compiling (first time)... 0 s"
    now[0] += 14.2
    dash.compile_progress(ev.CompileProgress(stage="backward 1", compiled=1, cache_misses=1, seconds=14.2))
    assert dash.compile_label.text() == "Compiling (first time)... 14 s \u00b7 backward 1, 1 done"
    dash.compile_done(27.6)
    dash.compile_started(first_time=False, expected_s=2.3)
    now[0] += 1.2
    dash.flush()
    assert dash.compile_label.text() == "Compiling (cached)... 1 s of ~2"


def test_progress_clock_eta():
    c = ProgressClock()
    c.start(1000)
    assert c.eta(now=0.0) is None
    c.update(100, now=10.0)   # first step seen: the rate counts from here
    c.update(300, now=30.0)   # 200 steps in 20 s
    assert c.eta(now=30.0) == pytest.approx(70.0)
    assert format_duration(70) == "1:10" and format_duration(5) == "5 s" and format_duration(3725) == "1:02:05"


def test_the_eta_stands_still_while_paused_and_does_not_count_the_pause():
    c = ProgressClock()
    c.start(1000)
    c.update(100, now=10.0)
    c.update(300, now=30.0)   # 10 steps/s: 700 to go, 70 s
    c.pause(now=30.0)
    assert c.eta(now=90.0) == pytest.approx(70.0)     # a minute paused: still 70 s, not 2:00
    c.resume(now=90.0)
    c.update(400, now=100.0)  # 10 s of training after the pause: 10 steps/s still
    assert c.eta(now=100.0) == pytest.approx(60.0)


def test_pausing_the_dashboard_pauses_its_clock(dash):
    dash.clock.update(10, now=0.0)
    dash.set_paused(True)
    assert dash.clock.paused and dash.pause_button.text() == "Resume"
    dash.set_paused(False)
    assert not dash.clock.paused


def test_pause_then_resume_clicked_before_the_workers_state_events_asks_for_each_once(dash, qtbot):
    """The walk found it: with a backlog of events the "paused" state came seconds after the click, the button
    still said Pause, and the click meant as Resume paused the paused run again (it stayed paused)."""
    asked = []
    dash.pause_requested.connect(lambda: asked.append("pause"))
    dash.resume_requested.connect(lambda: asked.append("resume"))
    qtbot.mouseClick(dash.pause_button, Qt.MouseButton.LeftButton)
    assert dash.pause_button.text() == "Resume"
    qtbot.mouseClick(dash.pause_button, Qt.MouseButton.LeftButton)
    assert asked == ["pause", "resume"] and dash.pause_button.text() == "Pause"
    dash.set_paused(True)                                # the events come late, in the worker's order
    dash.set_paused(False)
    assert dash.pause_button.text() == "Pause" and not dash.clock.paused


def test_end_of_run_disables_controls(dash):
    assert dash.stop_button.isEnabled()
    dash.set_state("completed", running=False)
    assert not dash.stop_button.isEnabled() and dash.eta_label.text() == ""


def test_compiling_line_takes_the_theme_and_is_readable_on_its_window(dash):
    from studio.themes import THEME_TABLE
    from studio.training.plot_theme import DARK, LIGHT, apply_plot_theme

    from .test_plots import _contrast

    for colours in (DARK, LIGHT):
        apply_plot_theme(dash, colours.name)
        assert colours.notice in dash.compile_label.styleSheet()
        assert _contrast(colours.notice, THEME_TABLE[colours.name].window) >= 4.5


def test_no_epoch_table_cell_is_cut_at_the_smallest_window(dash):
    dash.resize(1280, 720)                                  # the dashboard filling a 1280x800 window
    dash.show()                                             # rows arrive while it shows, as in a run
    QApplication.processEvents()
    for epoch, seconds in ((1, 12.5), (2, 0.063), (3, 0.009), (4, 1.5)):   # a digits MLP: "6.3e-...", "9.0e-..." once
        dash.end_epoch(ev.EpochEnd(epoch=epoch, step=10 * epoch, train_loss=0.123456, train_accuracy=0.98765,
                                   val_loss=0.23456, val_accuracy=0.97654, lr=2.33e-3, seconds=seconds))
        QApplication.processEvents()
    table, header = dash.epoch_table, dash.epoch_table.horizontalHeader()
    metrics = table.fontMetrics()
    for row in range(4):
        for col in range(dash.epochs.columnCount()):
            text = dash.epochs.item(row, col).text()
            assert header.sectionSize(col) >= metrics.horizontalAdvance(text), (col, text, header.sectionSize(col))
    assert dash.epochs.item(1, 6).text() == "0.063" and dash.epochs.item(2, 6).text() == "0.009"
    assert sum(header.sectionSize(c) for c in range(dash.epochs.columnCount())) <= table.viewport().width() + 1


class CountingDelegate(QStyledItemDelegate):
    """Counts the cells measured: ``resizeColumnToContents`` measures every row (up to 1,000)."""

    measured = 0

    def sizeHint(self, option, index):  # noqa: N802 (Qt override)
        CountingDelegate.measured += 1
        return super().sizeHint(option, index)


def test_epoch_table_columns_fit_every_row_and_a_new_row_measures_only_itself(dash):
    table, header = dash.epoch_table, dash.epoch_table.horizontalHeader()
    delegate = CountingDelegate(table)
    table.setItemDelegate(delegate)
    dash.show()

    def row(epoch, loss=0.12, seconds=0.06):
        dash.end_epoch(ev.EpochEnd(epoch=epoch, step=10 * epoch, train_loss=loss, train_accuracy=0.9, val_loss=0.2,
                                   val_accuracy=0.9, lr=1e-3, seconds=seconds))

    for epoch in range(1, 301):
        row(epoch)
    CountingDelegate.measured = 0
    row(301, loss=12345.678, seconds=98765.4)           # wider cells than any before, at row 300
    measured = CountingDelegate.measured
    for epoch in range(302, 305):
        row(epoch)                                      # narrow again: the columns keep their width
    columns = dash.epochs.columnCount() - 1             # the last column stretches
    assert measured <= 2 * columns, f"adding row 301 measured {measured} cells (every row's)"
    for col in range(columns):
        assert header.sectionSize(col) >= max(table.sizeHintForColumn(col), header.sectionSizeHint(col)), col
    assert header.sectionSize(1) > table.fontMetrics().horizontalAdvance("0.1200") + 8   # row 301 widened it


def test_a_new_run_starts_with_empty_axes_not_the_last_run_s(dash):
    """Found by the 1280x800 walk: the second run's plots showed the first's steps 0-500 and its loss range,
    empty, until its own first points came."""
    dash.resize(1280, 720)
    dash.show()
    for step in range(1, 501):
        dash.add_metrics(ev.Metrics(step=step, epoch=1, loss=2.4 - step / 250, accuracy=step / 600, lr=0.001,
                                    samples_per_s=30_000.0))
    dash.flush(everything=True)
    QApplication.processEvents()
    assert dash.plots["loss"].getPlotItem().vb.viewRange()[0][1] >= 500
    dash.begin_run("next", total_steps=100, lr=0.01)
    QApplication.processEvents()
    for plot in dash.plots.values():
        (x0, x1), (y0, y1) = plot.getPlotItem().vb.viewRange()
        assert x1 - x0 <= 1.5 and y1 - y0 <= 1.5, (plot, x0, x1, y0, y1)


def _curves(d: TrainingDashboard) -> dict[tuple[str, str], tuple[list[float], list[float]]]:
    d.flush(everything=True)
    return {(k, c): (p.buffer(c).x.tolist(), p.buffer(c).y.tolist()) for k, p in d.plots.items()
            for c in p.curve_names()}


@pytest.mark.slow
def test_a_run_followed_from_the_store_draws_what_its_events_drew(qtbot, tmp_path):
    """One name per metric: the store rows the worker writes for its events (trainer.metrics.names) give a
    followed run the very curves the live events give, CUDA memory counters that are not bytes included."""
    from studio.training.follow import RunFollower
    from trainer.metrics import names
    from trainer.store.runs import RunStore

    events: list[ev.Event] = [ev.Metrics(step=s, epoch=1, loss=2 / s, accuracy=s / 4, lr=0.01 * s, samples_per_s=90.0)
                              for s in (1, 2, 3)]
    events.append(ev.Memory(step=3, device="cuda:0", allocated=2 ** 20, reserved=2 ** 21, peak=3 * 2 ** 20,
                            active=2 ** 20, inactive_split=0, alloc_retries=1, num_ooms=0, free=2 ** 30, total=2 ** 31))
    per_class = ev.PerClass([1.0, 0.5], [0.5, 1.0], [0.66, 0.66], [2, 2])
    events.append(ev.EpochEnd(epoch=1, step=3, train_loss=0.7, train_accuracy=0.6, val_loss=0.8, val_accuracy=0.75,
                              per_class=per_class, confusion=[[1, 1], [0, 2]], classes=["a", "b"]))
    live = TrainingDashboard()
    qtbot.addWidget(live)
    live.begin_run("live", 3)
    store = RunStore(f"sqlite:///{tmp_path / 'runs.sqlite'}")
    rid = store.create_run(name="r", spec={}, graph={}, graph_hash="0" * 64, device="cuda:0", params=1)
    for e in events:
        step = getattr(e, "step", 0) or 0
        store.add_metrics(rid, names.rows(e, step))
        if isinstance(e, ev.Metrics):
            live.add_metrics(e)
        elif isinstance(e, ev.Memory):
            live.add_memory(e, step)
        elif isinstance(e, ev.EpochEnd):
            store.add_epoch_report(rid, e.epoch, {"per_class": per_class.to_dict(), "confusion": e.confusion,
                                                  "classes": e.classes})
            live.end_epoch(e)
    followed = TrainingDashboard()
    qtbot.addWidget(followed)
    follower = RunFollower(store, followed, rid, interval_ms=60_000)   # one poll, in __init__
    follower.stop()
    want = _curves(live)
    assert ("memory", "allocated") in want and ("accuracy", "val") in want and ("memory", "free") not in want
    assert _curves(followed) == want
    assert followed.epochs.rowCount() == 1 and followed.confusion.matrix_view.matrix().tolist() == [[1, 1], [0, 2]]
    store.close()
