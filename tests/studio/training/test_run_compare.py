"""Comparing runs (studio.training.compare, the Runs panel's curves, diff, filter, tags and notes): the
pure parts against hand-computed values, the panel on a real SQLite store driven by real clicks and keys."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from studio.training.compare import ema, matches, parse_filter, recipe_diff, shown_pair, x_values
from studio.training.runs_dock import RunsPanel
from trainer.store.runs import RunStore


def test_ema_is_tensorboards_debiased_average_and_keeps_gaps():
    ys = np.array([1.0, 2.0, np.nan, 4.0])
    out = ema(ys, 0.5)
    # by hand: 1; (0.25+1)/0.75 = 5/3; NaN; (0.625+2)/0.875 = 3
    assert out[0] == 1.0 and out[1] == pytest.approx(5 / 3) and np.isnan(out[2]) and out[3] == pytest.approx(3.0)
    assert np.array_equal(ema(ys[:2], 0.0), ys[:2])
    with pytest.raises(ValueError, match="smoothing must be in"):
        ema(ys, 1.0)


def test_x_as_epoch_or_wall_time_from_the_runs_own_series():
    ref = {"epoch": (np.array([10.0, 20.0, 40.0]), np.array([1.0, 1.0, 2.0])),
           "time": (np.array([10.0, 20.0, 40.0]), np.array([1.0, 2.0, 4.0]))}
    steps = np.array([10.0, 30.0])
    assert list(x_values(steps, "step", ref)) == [10.0, 30.0]
    assert list(x_values(steps, "epoch", ref)) == [0.5, 1.5]          # 20 steps an epoch
    assert list(x_values(steps, "wall time", ref)) == [1.0, 3.0]
    assert np.isnan(x_values(steps, "wall time", {})).all()          # a run from before the series: nothing


def test_recipe_diff_and_filter():
    a = {"name": "a", "optim": {"name": "adamw", "lr": 0.003}, "train": {"epochs": 10}, "model": {"graph": {"x": 1}}}
    b = {"name": "b", "optim": {"name": "sgd", "lr": 0.003}, "train": {"epochs": 10, "seed": 1},
         "model": {"graph": {"x": 2}}}
    assert recipe_diff(a, b) == [("name", "a", "b"), ("optim.name", "adamw", "sgd"), ("train.seed", None, 1)]
    # a sweep's draws: the digits that tell them apart, not 0.0004834927115858603 -> 0.006526684574033755
    assert shown_pair(0.0004834927115858603, 0.006526684574033755) == ("0.0004835", "0.006527")
    assert shown_pair(0.1, 0.10000001) == ("0.1", "0.10000001") and shown_pair(32, 64) == ("32", "64")
    assert shown_pair("adamw", "sgd") == ('"adamw"', '"sgd"') and shown_pair(None, 1) == ("null", "1")
    rule = parse_filter("digits tag:study lr<0.01 optim.name=adamw")
    assert matches(rule, "run 3 digits", ["study:s", "trial:0"], a)
    assert not matches(rule, "run 3 digits", ["baseline"], a)
    assert not matches(rule, "run 3 digits", ["study:s"], b)
    assert not matches(parse_filter("batch_size>=64"), "", [], a)         # a field the spec lacks
    assert matches(parse_filter("epochs=10 tag:trial:0"), "", ["trial:0"], a)


def _store(url: str) -> tuple[RunStore, list[int]]:
    store = RunStore(url)
    ids = []
    for name, opt, lr in (("base", "adamw", 0.003), ("trial", "sgd", 0.01)):
        rid = store.create_run(name=name, spec={"optim": {"name": opt, "lr": lr}, "train": {"epochs": 2}},
                               graph={"nodes": []}, graph_hash="h", device="cpu", params=1)
        steps = np.arange(1, 41)
        rows = [(int(s), "train/loss", float(2.0 / s + (0.3 if s % 2 else 0.0))) for s in steps]
        rows += [(int(s), "epoch", float(1 + (s > 20))) for s in steps] + [(int(s), "time", s * 0.5) for s in steps]
        store.add_metrics(rid, rows)
        store.finish(rid, "completed", epoch=2, step=40)
        ids.append(rid)
    store.update_run(ids[1], tags=["study:s", "trial:1"])
    return store, ids


def test_the_runs_panel_smooths_diffs_filters_and_keeps_tags_and_notes(qtbot, tmp_path):
    store, (base, trial) = _store(f"sqlite:///{tmp_path / 'runs.sqlite'}")
    panel = RunsPanel(store)
    qtbot.addWidget(panel)
    panel.resize(1100, 800)
    panel.show()
    panel.select_ids([base, trial])
    panel.metric_box.setCurrentIndex(panel.metric_box.findData("train/loss"))
    QTest.mouseClick(panel.buttons["Overlay"], Qt.MouseButton.LeftButton)
    raw = panel.curves.raw_curves()
    assert len(raw) == 2 and len(raw[0]) == 40                 # raw kept, faint, behind each smoothed curve
    smooth = panel.plot.buffer(f"run {base} base").y
    assert np.std(np.diff(smooth)) < np.std(np.diff(raw[0]))   # the zig-zag is smoothed
    panel.curves.x_axis.setCurrentText("wall time")
    xs = panel.plot.buffer(f"run {base} base").x
    assert xs[0] == pytest.approx(0.5) and xs[-1] == pytest.approx(20.0)
    QTest.mouseClick(panel.curves.log_y, Qt.MouseButton.LeftButton)
    assert panel.plot.getPlotItem().ctrl.logYCheck.isChecked()

    QTest.mouseClick(panel.buttons["Diff"], Qt.MouseButton.LeftButton)
    text = panel.diff_text.toPlainText()
    assert 'optim.name: "adamw" -> "sgd"' in text and "optim.lr: 0.003 -> 0.01" in text and "epochs" not in text

    QTest.keyClicks(panel.filter, "tag:study optim.name=sgd")
    assert panel.proxy.rowCount() == 1
    panel.filter.clear()
    assert panel.proxy.rowCount() == 2

    panel.select_ids([base])
    panel.tabs.setCurrentIndex(2)
    QTest.keyClicks(panel.notes.tags, "baseline, keep")
    QTest.keyClicks(panel.notes.notes, "the default recipe")
    QTest.mouseClick(panel.notes.save, Qt.MouseButton.LeftButton)
    again = RunStore(store.url).run(base)
    assert (again.tags, again.notes) == (["baseline", "keep"], "the default recipe")
    QTest.keyClicks(panel.filter, "tag:baseline")
    assert panel.proxy.rowCount() == 1
    panel.grab().save(str(tmp_path / "runs.png"))


def test_a_poll_that_finds_nothing_new_signals_no_row(qtbot, tmp_path):
    """With 1,000 runs a poll that re-signalled every row re-filtered and re-sorted them all (3.3 s of 2 s)."""
    store, (base, _trial) = _store(f"sqlite:///{tmp_path / 'runs.sqlite'}")
    panel = RunsPanel(store)
    qtbot.addWidget(panel)
    changed: list[tuple[int, int]] = []
    panel.model.dataChanged.connect(lambda first, last, *_: changed.append((first.row(), last.row())))
    panel.refresh()
    assert changed == []
    store.update_run(base, notes="looked at")
    panel.refresh()
    row = next(i for i, r in enumerate(panel.model.rows) if r.id == base)
    assert changed == [(row, row)]
