"""Experiments > New Sweep: the design's sweep variables in the search space, the space checked as it
is typed, and (slow) the sweep started from the studio as the torch-studio sweep command, its trials
real worker runs in the window's run store, followed live by the workspace."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from graph_editor.model import load_graph
from graph_editor.model.commands import UndoStack
from graph_editor.model.sweep_vars import SetSweepVariable
from studio.experiments.new_sweep import SweepDialog, SweepRequest
from tests.trainer.helpers import DIGITS_CNN, THOROUGH

pytestmark = pytest.mark.qt


def test_the_dialog_starts_from_the_design_s_sweep_variables_and_checks_the_space(qtbot):
    graph = load_graph(DIGITS_CNN)
    UndoStack().push(SetSweepVariable(graph, "conv1", "out_channels", "16..64:step16"))
    d = SweepDialog(graph)
    qtbot.addWidget(d)
    d.show()
    assert d.space.text() == "lr=1e-4..3e-2:log,node.conv1.out_channels=16..64:step16"
    assert "node.conv1.out_channels=16..64:step16" in d.from_design.text() and d.start.isEnabled()
    QTest.mouseClick(d.space, Qt.MouseButton.LeftButton)
    QTest.keyClick(d.space, Qt.Key.Key_End)
    QTest.keyClicks(d.space, ",node.conv1.out_channels=8..9")
    qtbot.waitUntil(lambda: not d.start.isEnabled(), timeout=3000)
    assert "space token 3" in d.problem.text() and "searched twice" in d.problem.text()
    d.space.setText("lr=1e-4..3e-2:log,node.dropout.p=0.1|1.5")
    qtbot.waitUntil(lambda: "node.dropout.p" in d.problem.text(), timeout=3000)    # the layer's own rule
    d.space.setText("lr=1e-4..3e-2:log,node.dropout.p=0.1|0.5")
    qtbot.waitUntil(d.start.isEnabled, timeout=3000)
    request = d.request()
    assert request.arguments("g.graph.json", "sqlite:///x")[:4] == ["sweep", "g.graph.json", "--data", "digits"]


@pytest.mark.slow
@pytest.mark.process
@pytest.mark.skipif(not THOROUGH, reason="make test-thorough: two worker runs through the sweep command")
def test_a_sweep_started_in_the_studio_runs_its_trials_and_shows_them(window, qtbot, tmp_path):
    window.controller.graph  # noqa: B018 - the starter graph is replaced by the template next
    assert window.files.open(DIGITS_CNN)
    assert window.controller.set_sweep("conv1", "out_channels", "16..32:step16") is None
    asked = []

    def ask(graph):
        asked.append(sorted(graph.metadata.get("sweep", {})))
        return SweepRequest("digits", 2, 1, 1, "lr=1e-3..1e-2:log,node.conv1.out_channels=16..32:step16", "none",
                            "", "studio-sweep")

    window.experiments.ask = ask
    button = window.workspaces.bar.widgetForAction(window.workspaces.items["Experiments"].action)
    QTest.mouseClick(button, Qt.MouseButton.LeftButton)
    panel = window.experiments.panel
    QTest.mouseClick(panel.new_button, Qt.MouseButton.LeftButton)
    assert asked == [["conv1.out_channels"]] and panel.stop_button.isEnabled()
    lines: list[str] = []
    window.experiments.sweep.line.connect(lines.append)
    with qtbot.waitSignal(window.experiments.sweep.finished, timeout=300_000) as done:
        pass
    assert done.args == [0], lines
    try:
        qtbot.waitUntil(lambda: (window.experiments.refresh(force=True), panel.table.rowCount())[1] == 2,
                        timeout=30_000)
    except Exception:
        raise AssertionError((lines, panel.status.text(), panel.table.rowCount())) from None
    assert panel.study.currentText() == "studio-sweep", panel.status.text()
    states = {panel.table.item(r, 1).text() for r in range(2)}
    assert states == {"complete"}, states
    assert not panel.stop_button.isEnabled() and panel.new_button.isEnabled()


@pytest.mark.process
def test_new_sweep_starts_from_the_last_run_s_dataset_as_the_train_dialog_does(window, qtbot, tmp_path):
    import numpy as np
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication


    def asked() -> str:
        seen: list[str] = []

        def answer() -> None:
            dialog = QApplication.activeModalWidget()
            assert isinstance(dialog, SweepDialog)
            seen.append(dialog.data.text())
            dialog.reject()

        QTimer.singleShot(300, answer)
        QTest.mouseClick(window.experiments.panel.new_button, Qt.MouseButton.LeftButton)
        return seen[0]

    button = window.workspaces.bar.widgetForAction(window.workspaces.items["Experiments"].action)
    QTest.mouseClick(button, Qt.MouseButton.LeftButton)
    assert asked() == "digits"                       # nothing trained yet
    rng = np.random.default_rng(0)
    data = tmp_path / "mine.npz"
    np.savez(data, x=rng.random((40, 1, 8, 8), dtype=np.float32), y=np.arange(40) % 4)   # any run records its recipe
    controller = window.training.controller()
    controller.start({"data": {"dataset": str(data)}, "train": {"epochs": 1, "batch_size": 8}, "device": "cpu"})
    with qtbot.waitSignal(controller.session.ended, timeout=120_000):
        pass
    QTest.mouseClick(button, Qt.MouseButton.LeftButton)
    assert asked() == str(data)


@pytest.mark.slow
@pytest.mark.process
@pytest.mark.skipif(not THOROUGH, reason="make test-thorough: a sweep and its worker stopped from the studio")
def test_stop_sweep_stops_the_sweep_and_its_trial_leaving_no_worker(window, qtbot, tmp_path):
    """Stop Sweep, clicked while a trial trains: the sweep process ends, its worker with it (a clean stop),
    and the trial is recorded interrupted with its parameters queued for the study's next sweep."""
    import time

    import optuna

    from trainer.store.liveness import process_alive
    from trainer.store.runs import RunStore, StoreError

    assert window.files.open(DIGITS_CNN)
    window.experiments.ask = lambda graph: SweepRequest("digits", 1, 1, 200, "lr=1e-3..1e-2:log", "none", "", "stop-me")
    button = window.workspaces.bar.widgetForAction(window.workspaces.items["Experiments"].action)
    QTest.mouseClick(button, Qt.MouseButton.LeftButton)
    panel = window.experiments.panel
    QTest.mouseClick(panel.new_button, Qt.MouseButton.LeftButton)
    db = window.experiments.url

    def training() -> object | None:
        try:
            return next((r for r in RunStore(db, create=False).runs() if r.status == "running" and r.epoch >= 1), None)
        except StoreError:
            return None

    deadline, run = time.monotonic() + 300, None
    while run is None and time.monotonic() < deadline and window.experiments.sweep.running():
        qtbot.wait(500)
        run = training()
    assert run is not None, "no trial trained an epoch"
    assert panel.stop_button.isEnabled()
    QTest.mouseClick(panel.stop_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not window.experiments.sweep.running() and panel.new_button.isEnabled(), timeout=120_000)
    deadline = time.monotonic() + 60
    while process_alive(run.pid, run.pid_started) and time.monotonic() < deadline:
        qtbot.wait(200)
    assert not process_alive(run.pid, run.pid_started), "the stopped sweep's worker still trains"
    assert RunStore(db).run(run.id).status == "stopped"
    trials = optuna.load_study(study_name="stop-me", storage=db).get_trials()
    assert [t.state.name for t in trials] == ["FAIL", "WAITING"] and trials[0].user_attrs["interrupted"]
    assert trials[1].system_attrs["fixed_params"] == trials[0].params
