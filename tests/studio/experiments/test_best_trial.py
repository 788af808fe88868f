"""The best trial's Export ONNX… and Retrain on Train+Val, clicked (QTest) in the Experiments workspace of a
real main window (offscreen): a study as a sweep leaves it, its best trial a real worker run of the shipped
Digits CNN template (channels_last) on the digits, 1 epoch. Export runs the real ONNX exporter on that run's
best checkpoint (checked by onnx.checker and onnxruntime against PyTorch on the run's validation samples);
Retrain starts the real worker on train+val, and its run is tagged with the study in the store and in Runs."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import optuna
import pytest
from optuna.trial import TrialState
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from tests.trainer.helpers import DIGITS_CNN, run_worker, write_spec
from trainer.store.runs import RunStore
from trainer.sweep.study import load_study, make_pruner, open_storage

pytestmark = [pytest.mark.qt, pytest.mark.process, pytest.mark.export]

STUDY = "digits-sweep"


@pytest.fixture(scope="module")
def swept(tmp_path_factory) -> tuple[Path, int]:
    """A run store holding a study of two trials: 1 pruned before any worker, 0 complete and the best, its
    run trained by the real worker (tagged as a sweep tags it). Made once; each test works on a copy."""
    folder = tmp_path_factory.mktemp("swept")
    db = f"sqlite:///{folder / 'runs.sqlite'}"
    spec = write_spec(folder, DIGITS_CNN, name=f"{STUDY} trial 0", tags=[f"study:{STUDY}", "trial:0"],
                      optim={"lr": 3e-3})
    code, _events, err = run_worker(spec, db)
    assert code == 0, err
    store = RunStore(db)
    run = store.runs()[-1]
    value = store.metric_max(run.id, "val/accuracy")
    store.close()
    study = load_study(open_storage(db), STUDY, metric="val_accuracy", pruner=make_pruner("median", 1))
    dists = {"lr": optuna.distributions.FloatDistribution(1e-4, 1e-1, log=True)}
    study.add_trial(optuna.trial.create_trial(params={"lr": 3e-3}, distributions=dists, value=value,
                                              intermediate_values={1: value}, user_attrs={"run_id": run.id}))
    study.add_trial(optuna.trial.create_trial(
        params={"lr": 1e-2}, distributions=dists, state=TrialState.PRUNED,
        user_attrs={"reason": "predicted peak memory 370.3 MiB at batch 4096 exceeds the budget of 64.0 MiB"}))
    return folder, run.id


def _window(make_window, swept: tuple[Path, int], tmp_path: Path):
    """The studio on a copy of the swept store, in the Experiments workspace at 1440x900."""
    # SQLite's backup, not a file copy: the study's rows may still be in the write-ahead log beside the file
    source, copy = sqlite3.connect(swept[0] / "runs.sqlite"), sqlite3.connect(tmp_path / "runs.sqlite")
    try:
        source.backup(copy)
    finally:
        source.close()
        copy.close()
    window = make_window()
    window.resize(1440, 900)
    button = window.workspaces.bar.widgetForAction(window.workspaces.items["Experiments"].action)
    QTest.mouseClick(button, Qt.MouseButton.LeftButton)
    panel = window.experiments.panel
    assert panel.study.currentText() == STUDY and panel.table.rowCount() == 2
    return window, panel


def test_export_onnx_of_the_best_trial_ships_its_run_verified(make_window, swept, qtbot, tmp_path):
    window, panel = _window(make_window, swept, tmp_path)
    run_id = swept[1]
    window.export.export_dir = lambda: tmp_path / "exports"
    button = panel.buttons["export"]
    assert button.isEnabled() and button.toolTip() == "Export ONNX (trial 0)"    # no row chosen: the best trial
    QTest.mouseClick(button, Qt.MouseButton.LeftButton)
    dialog = window.export.dialogs[-1]
    with qtbot.waitSignal(dialog.exported, timeout=300_000) as blocker:
        pass
    assert blocker.args == [True], dialog.status.text()
    assert dialog.status.text().startswith(f"run {run_id} ") and "best checkpoint" in dialog.status.text()
    report = dialog.report
    assert report.verified and "verified" in dialog.verdict.text() and "untrained" not in dialog.verdict.text()
    names = [c.name for c in report.checks]
    assert "onnx.checker" in names and any(n.startswith("onnxruntime parity") for n in names), names
    assert all(c.passed for c in report.checks), report.checks
    path = Path(report.path)
    assert path.parent == tmp_path / "exports" and path.suffix == ".onnx"
    import onnxruntime as ort

    # the file itself runs: a batch of 3 digits' worth of raw pixels in, 10 classes out
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    inp = session.get_inputs()[0]
    shape = [3 if not isinstance(d, int) else d for d in inp.shape]
    out = session.run(None, {inp.name: np.zeros(shape, np.float32)})[0]
    assert out.shape == (3, 10)
    store = RunStore(f"sqlite:///{tmp_path / 'runs.sqlite'}")
    assert [a.path for a in store.artifacts(run_id)] == [str(path)]    # kept with the trial's run
    dialog.grab().save(str(tmp_path / "export_dialog.png"))


def test_retrain_of_the_best_trial_trains_on_train_val_as_a_run_tagged_with_its_study(make_window, swept, qtbot,
                                                                                      tmp_path):
    window, panel = _window(make_window, swept, tmp_path)
    run_id = swept[1]
    controller = window.training.controller()
    QTest.mouseClick(panel.table.viewport(), Qt.MouseButton.LeftButton,
                     pos=panel.table.visualItemRect(panel.table.item(1, 0)).center())
    assert panel.selected_trial()["number"] == 1 and panel.buttons["retrain"].toolTip().endswith("(trial 0)")
    with qtbot.waitSignal(controller.session.ended, timeout=300_000) as ended:   # a pruned row has no run:
        QTest.mouseClick(panel.buttons["retrain"], Qt.MouseButton.LeftButton)   # the best trial is retrained
    assert ended.args[0] == "completed", ended.args
    store = RunStore(controller.db_url)
    again = max(store.runs(), key=lambda r: r.id)
    assert again.id != run_id and again.status == "completed"
    assert again.tags == [f"study:{STUDY}", "retrain", "retrain-of-trial:0"]
    assert again.name == f"{STUDY} trial 0 (train+val)" and again.spec["data"]["val_fraction"] == 0
    assert again.graph_hash == store.run(run_id).graph_hash        # the trial's own graph, not the one on the canvas
    assert store.metric_max(again.id, "val/accuracy") is None       # no validation split held back
    runs = controller.runs                                             # Runs says which study it belongs to
    runs.refresh()
    row = next(r for r in range(runs.proxy.rowCount()) if runs.proxy.index(r, 0).data() == str(again.id))
    tags = runs.proxy.index(row, runs.model.columnCount() - 1).data()
    assert tags == f"study:{STUDY}, retrain, retrain-of-trial:0"
    runs.filter.setText("")
    QTest.keyClicks(runs.filter, f"tag:study:{STUDY}")
    qtbot.waitUntil(lambda: runs.proxy.rowCount() == 2, timeout=5000)    # the trial and its retrained run
    window.workspaces.show("Runs")
    window.grab().save(str(tmp_path / "runs_retrained.png"))
