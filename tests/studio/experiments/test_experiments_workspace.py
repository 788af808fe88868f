"""The Experiments workspace in a real main window (offscreen), on a real study in the window's run
store (SQLite, Optuna's storage): entered from its mode-bar button, the trials table and the four charts
filled, a trial added while it shows appears (live), the best trial's graph opened by a click."""

from __future__ import annotations

import copy

import optuna
import pytest
from optuna.trial import TrialState
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QComboBox, QStyle, QStyleOptionComboBox

from graph_editor.model import graph_to_dict, load_graph
from studio.experiments import retrain_spec
from studio.experiments.panel import ExperimentsPanel
from tests.trainer.helpers import DIGITS_CNN
from trainer.spec import spec_from_dict
from trainer.store.runs import RunStore
from trainer.sweep.study import load_study, make_pruner, open_storage


def _study(url: str, name: str = "s") -> optuna.Study:
    """A study as a sweep leaves it: a complete trial with its run (conv1 48 wide), one pruned by the
    median rule after an epoch, one pruned by the memory budget before any worker."""
    graph = graph_to_dict(load_graph(DIGITS_CNN))
    next(n for n in graph["nodes"] if n["id"] == "conv1")["params"]["out_channels"] = 48
    store = RunStore(url)
    run_id = store.create_run(name="s trial 0", spec={"train": {"epochs": 2}}, graph=graph, graph_hash="h",
                              device="cpu", params=1)
    store.finish(run_id, "completed")
    study = load_study(open_storage(url), name, metric="val_accuracy", pruner=make_pruner("median", 2))
    dists = {"lr": optuna.distributions.FloatDistribution(1e-4, 1e-1, log=True),
             "node.conv1.out_channels": optuna.distributions.IntDistribution(16, 64, step=16)}
    for params, state, values, attrs in (
            ({"lr": 3e-3, "node.conv1.out_channels": 48}, TrialState.COMPLETE, {1: 0.9, 2: 0.97},
             {"run_id": run_id}),
            ({"lr": 1e-4, "node.conv1.out_channels": 16}, TrialState.PRUNED, {1: 0.3},
             {"run_id": run_id + 1, "reason": "pruned by the median rule after epoch 1 (val_accuracy 0.3000)"}),
            ({"lr": 1e-2, "node.conv1.out_channels": 64}, TrialState.PRUNED, {},
             {"reason": "predicted peak memory 370.3 MiB at batch 4096 exceeds the budget of 64.0 MiB"})):
        study.add_trial(optuna.trial.create_trial(
            params=params, distributions=dists, state=state, intermediate_values=values, user_attrs=attrs,
            value=values[2] if state == TrialState.COMPLETE else None))
    return study


def _enter(window) -> None:
    button = window.workspaces.bar.widgetForAction(window.workspaces.items["Experiments"].action)
    QTest.mouseClick(button, Qt.MouseButton.LeftButton)
    assert window.workspaces.current == "Experiments"


@pytest.mark.slow
def test_the_workspace_shows_a_study_live_and_opens_the_best_trials_graph(window, qtbot, tmp_path):
    window.resize(1440, 900)
    study = _study(f"sqlite:///{tmp_path / 'runs.sqlite'}")
    assert window.experiments.panel is None           # nothing built before the first entry
    _enter(window)
    panel = window.experiments.panel
    assert panel.isVisible() and not window.canvas.isVisible()
    assert panel.study.currentText() == "s" and panel.table.rowCount() == 3
    assert "best: trial 0, val_accuracy 0.9700" in panel.status.text()
    states = [panel.table.item(r, 1).text() for r in range(3)]
    assert states == ["complete", "pruned", "pruned"]
    last = panel.table.columnCount() - 1      # the reason in a few words, whole (it read "predicte…")
    briefs = [panel.table.item(r, last).text() for r in range(3)]
    assert briefs == ["", "median rule, epoch 1", "over budget: 370.3 MiB"]
    assert panel.table.item(2, last).toolTip().startswith("predicted peak memory 370.3 MiB at batch 4096")
    assert all(panel.table.fontMetrics().horizontalAdvance(b) + 8 <= panel.table.columnWidth(last) for b in briefs)
    history, parallel, importance, intermediate = panel.charts
    assert len(history.plotItem.listDataItems()) == 2            # the trials and the best so far
    assert history.note == intermediate.note == parallel.note == ""
    low, high = history.plotItem.viewRange()[1]
    assert 0.9 < low < 0.97 < high < 1.0        # around the one complete trial (it read 0.5 ... 1.4)
    assert len(intermediate.plotItem.listDataItems()) == 3       # two trials' epochs and the pruned one's cross
    assert len(parallel.plotItem.listDataItems()) == 3           # every finished trial with parameters
    assert importance.note == "needs 2 complete trials"            # one complete trial: it says so, not empty
    axis, (low, high) = history.plotItem.getAxis("bottom"), history.plotItem.viewRange()[0]
    ticks = [v for _spacing, values in axis.tickValues(low, high, axis.width() or 300) for v in values]
    assert ticks and all(float(v).is_integer() for v in ticks)    # whole trials (it read -0.4 ... 0.4)
    axis, (low, high) = intermediate.plotItem.getAxis("bottom"), intermediate.plotItem.viewRange()[0]
    ticks = [v for _spacing, values in axis.tickValues(low, high, axis.width() or 300) for v in values]
    assert ticks and all(float(v).is_integer() for v in ticks)    # whole epochs (it read 1.0, 1.2 ... 2.0)
    window.set_theme("light")                                     # rendered and looked at in both themes
    panel.grab().save(str(tmp_path / "experiments_light.png"))
    window.set_theme("dark")

    trial = study.ask({"lr": optuna.distributions.FloatDistribution(1e-4, 1e-1, log=True)})
    trial.report(0.5, 1)                                          # a trial running now: shown within a refresh
    qtbot.waitUntil(lambda: panel.table.rowCount() == 4, timeout=10_000)
    assert "live" in panel.status.text()

    QTest.mouseClick(panel.buttons["open"], Qt.MouseButton.LeftButton)   # no row chosen: the best trial
    assert window.document.graph.node("conv1").params["out_channels"] == 48
    assert window.workspaces.current == "Design"       # shown where it is edited, not behind the charts
    _enter(window)
    panel.grab().save(str(tmp_path / "experiments.png"))


def test_retraining_gives_the_validation_split_to_training():
    spec = {"name": "s trial 3", "data": {"dataset": "digits", "val_fraction": 0.1},
            "checkpoints": {"metric": "val_loss"}, "early_stopping": {"patience": 3}, "train": {"epochs": 4}}
    again = retrain_spec(copy.deepcopy({**spec, "tags": ["study:s", "trial:3"]}), "s trial 3", ["study:s", "trial:3"])
    checked = spec_from_dict(again)                # the worker would accept it
    assert checked.data.val_fraction == 0 and not checked.checkpoints.best and checked.early_stopping.patience == 0
    assert checked.train.epochs == 4 and checked.name == "s trial 3 (train+val)" and spec["data"]["val_fraction"] == 0.1
    assert checked.tags == ["study:s", "retrain", "retrain-of-trial:3"]   # the study's, not the trial's own tag


@pytest.mark.slow
def test_with_no_study_the_workspace_says_how_to_make_one(window, qtbot, tmp_path):
    """An empty run store: the workspace says what a sweep is and how to start one (it once showed an
    empty table headed "1 2 3 4"); the first study replaces that page with its trials, live."""
    window.resize(1440, 900)
    _enter(window)
    panel = window.experiments.panel
    assert panel.empty.isVisible() and not panel.table.isVisible()
    # a new user's store does not exist yet: that is no error (it said "Cannot read the studies: ... no run
    # store at ...", and that one long line made the window 1985 px wide, the page cut at the screen's edge)
    assert not (tmp_path / "runs.sqlite").exists() and "Cannot read" not in panel.status.text(), panel.status.text()
    panel.status.setText("Cannot read the studies: " + "a long reason " * 40)
    QApplication.processEvents()
    assert window.width() == 1440 and window.minimumSizeHint().width() <= 1440
    assert "New Sweep…" in panel.empty.text() and "Sweep lines" in panel.empty.text()
    headers = [panel.table.horizontalHeaderItem(c).text() for c in range(panel.table.columnCount())]
    assert headers == ["#", "state", "value", "run"]
    panel.grab().save(str(tmp_path / "empty.png"))
    _study(f"sqlite:///{tmp_path / 'runs.sqlite'}", name="Digits_CNN-sweep-1127-082138")
    qtbot.waitUntil(lambda: panel.table.isVisible() and panel.table.rowCount() == 3, timeout=10_000)
    assert not panel.empty.isVisible()
    shown = panel.study.style().subControlRect(QStyle.ComplexControl.CC_ComboBox, _combo_option(panel.study),
                                               QStyle.SubControl.SC_ComboBoxEditField, panel.study)
    assert panel.study.fontMetrics().horizontalAdvance(panel.study.currentText()) <= shown.width()  # whole name


def _combo_option(combo: QComboBox) -> QStyleOptionComboBox:
    option = QStyleOptionComboBox()
    option.initFrom(combo)
    return option


def test_charts_say_what_they_wait_for_and_show_every_bar_once_they_can(qtbot, tmp_path):
    """While the first trials run the history and parallel coordinates were empty frames (the history's
    axis read 0.2 ... 0.8 trials); and the importances, drawn after their "needs 2 complete trials" note,
    kept the note's 0..1 view: two bars cut in half, the most important (lr, at y=2) out of sight."""
    panel = ExperimentsPanel()
    qtbot.addWidget(panel)
    panel.resize(1400, 800)
    panel.show()
    running = {"study": "s", "metric": "val_accuracy", "direction": "maximize", "best": None, "running": 2,
               "trials": [{"number": n, "state": "running", "params": {"lr": 1e-3}, "value": None, "run_id": n + 1,
                           "reason": "", "intermediate": {}} for n in range(2)],
               "importances": {}, "ranges": {"lr": [1e-4, 1e-2, "log"]}}
    panel.set_report(running)
    history, parallel, importance, intermediate = panel.charts
    assert (history.note, parallel.note, importance.note, intermediate.note) == (
        "no complete trial yet", "no finished trial yet", "needs 2 complete trials", "no epoch measured yet")
    done = {**running, "running": 0, "importances": {"batch_size": 0.003, "conv1.out_channels": 0.008, "lr": 0.989},
            "trials": [{**t, "state": "complete", "value": 0.9, "intermediate": {"1": 0.9}} for t in running["trials"]]}
    panel.set_report(done)
    assert importance.note == ""
    low, high = importance.plotItem.viewRange()[1]
    assert low <= -0.3 and high >= 2.3, (low, high)       # three bars 0.6 high at y = 0, 1, 2, all whole
    import pyqtgraph as pg

    # parallel coordinates: the axes' names under the axes, no axis line through them
    low, high = parallel.plotItem.viewRange()[1]
    ends = [low + line.span[0] * (high - low) for line in parallel.plotItem.items if isinstance(line, pg.InfiniteLine)]
    names = [item.pos().y() for item in parallel.plotItem.items if isinstance(item, pg.TextItem)]
    assert len(ends) == len(names) == 2 and max(names) < min(ends) == pytest.approx(0), (names, ends)
    panel.grab().save(str(tmp_path / "experiments_charts.png"))
