"""The studio trains with the real worker process: start, watch, stop, kill, leave running, reopen.

Every test here starts `python -m trainer run` on the embedded digits (a few seconds each on a CPU).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QPoint, Qt

from graph_editor.model.serialize import graph_to_dict, load_graph
from studio.training.controller import BACKGROUND, STOP
from studio.training.runs_dock import RunsPanel
from trainer.store.runs import RunStore

pytestmark = [pytest.mark.qt, pytest.mark.slow, pytest.mark.process]
WAIT = 90_000
DIGITS_CNN = Path(__file__).resolve().parents[3] / "assets" / "templates" / "digits_cnn.graph.json"


def _spec(epochs: int, name: str) -> dict:
    graph = graph_to_dict(load_graph(DIGITS_CNN))
    return {"name": name, "model": {"graph": graph}, "device": "cpu", "train": {"epochs": epochs, "batch_size": 64}}


class _NoQuestions:
    """The studio's prompts; this test expects none of them to be asked."""

    def __getattr__(self, name):
        def asked(*args):
            raise AssertionError(f"the studio unexpectedly asked {name}{args}")
        return asked


class _StopOnClose(_NoQuestions):
    def running_run(self, parent):
        return "stop"


@pytest.fixture
def studio_window(qapp, tmp_path):
    """The real main window (studio.app.build), editing the digits CNN template."""
    from studio.app import build
    from studio.settings import StudioSettings
    from studio.training.train_dialog import TrainDialog

    window = build(qapp, StudioSettings.at(tmp_path / "settings.ini"), _NoQuestions(), tmp_path / "recovery",
                   autosave_ms=3_600_000, runs_db=f"sqlite:///{tmp_path / 'runs.sqlite'}",
                   blocks_dir=tmp_path / "blocks")
    window.training.work_dir = tmp_path / "launches"
    window.resize(1400, 900)
    window.show()
    assert window.files.open(DIGITS_CNN)
    yield window, TrainDialog
    hook = window.training
    if hook.built and hook.controller().session.is_running():
        os.killpg(hook.controller().session.bridge.pid, signal.SIGKILL)
    window.document.undo_stack.setClean()
    window.close()


def test_train_from_the_studio_window_pause_lr_stop_and_find_in_runs_dock(qtbot, studio_window):
    window, dialog_type = studio_window
    window.training.train_action.trigger()  # Run > Train...
    controller = window.training.controller()
    dialog = window.findChild(dialog_type)
    qtbot.waitUntil(dialog.start_button.isEnabled, timeout=WAIT)
    dialog.form.set_values({"train.epochs": 60, "name": ""})    # unnamed: the run takes the graph's name
    with qtbot.waitSignal(controller.session.bridge.run_started, timeout=WAIT) as started:
        qtbot.mouseClick(dialog.start_button, Qt.MouseButton.LeftButton)
    run_id = started.args[0].run_id
    assert controller.dashboard_dock.isVisible()
    loss = controller.dashboard.plots["loss"]
    qtbot.waitUntil(lambda: "train" in loss.curve_names() and len(loss.buffer("train")) >= 3, timeout=WAIT)
    dash, bridge = controller.dashboard, controller.session.bridge
    assert dash.progress.value() > 0
    with qtbot.waitSignal(bridge.state_changed, timeout=WAIT, check_params_cb=lambda e: e.state == "paused"):
        qtbot.mouseClick(dash.pause_button, Qt.MouseButton.LeftButton)
    assert dash.pause_button.text() == "Resume" and dash.state.text() == "paused"
    with qtbot.waitSignal(bridge.state_changed, timeout=WAIT, check_params_cb=lambda e: e.state == "running"):
        qtbot.mouseClick(dash.pause_button, Qt.MouseButton.LeftButton)
    dash.lr_box.setValue(0.0005)
    with qtbot.waitSignal(bridge.metrics, timeout=WAIT, check_params_cb=lambda e: e.lr == pytest.approx(5e-4)):
        qtbot.mouseClick(dash.lr_button, Qt.MouseButton.LeftButton)
    dialogs = len(window.findChildren(dialog_type))
    window.training.train_action.trigger()     # Train again while a run is going: no dialog, no question
    assert len(window.findChildren(dialog_type)) == dialogs
    assert window.statusBar().currentMessage() == "A run is going: stop it before starting another."
    assert controller.dashboard_dock.isVisible()
    with qtbot.waitSignal(controller.session.ended, timeout=WAIT) as ended:
        qtbot.mouseClick(dash.stop_button, Qt.MouseButton.LeftButton)
    assert ended.args[0] == "stopped"
    assert dash.state.text().startswith("stopped")
    window.training.runs_action.trigger()  # Run > Runs
    assert controller.runs_dock.isVisible()
    controller.runs.filter.setText("digits_cnn")
    row = controller.runs.row(run_id)
    assert row is not None and row.status == "stopped" and row.name == "digits_cnn"    # not "spec"
    assert controller.runs.proxy.rowCount() == 1


def test_killed_worker_shows_failed_and_the_studio_carries_on(qtbot, controller):
    pid = controller.start(_spec(60, "to be killed"))
    bridge = controller.session.bridge
    qtbot.waitUntil(lambda: bridge.run_id is not None and controller.dashboard.clock.done > 0, timeout=WAIT)
    run_id = bridge.run_id
    with qtbot.waitSignal(controller.session.ended, timeout=WAIT) as ended:
        os.kill(pid, signal.SIGKILL)
    assert ended.args[0] == "failed" and "SIGKILL" in ended.args[1]
    assert controller.dashboard.state.text().startswith("failed: the worker process was killed by SIGKILL")
    assert controller.dashboard.window().isVisible()     # the window the docks live in
    controller.runs.refresh()
    row = controller.runs.row(run_id)
    assert row.status == "interrupted" and row.error  # the store marks a vanished worker's run
    controller.runs.select_ids([run_id])
    assert "Reason:" in controller.runs.details.text()
    # The studio carries on: the next run starts and completes.
    controller.start(_spec(1, "after the crash"))
    with qtbot.waitSignal(controller.session.ended, timeout=WAIT) as ended:
        pass
    assert ended.args[0] == "completed"
    reopened = RunStore(controller.db_url)
    assert {r.id: r.status for r in reopened.runs()} == {run_id: "interrupted", run_id + 1: "completed"}
    reopened.close()


def test_confusion_cell_click_shows_the_samples_of_that_cell(qtbot, controller):
    controller.start(_spec(2, "confusion"))
    with qtbot.waitSignal(controller.session.ended, timeout=WAIT):
        pass
    panel = controller.dashboard.confusion
    epoch_matrix = panel.matrix_view.matrix().copy()
    assert epoch_matrix.sum() == controller.session.info.val_size
    assert controller.dashboard.epochs.rowCount() == 2
    t = int(np.argmax(np.diag(epoch_matrix)))
    x, y = panel.matrix_view.cell_center(t, t)
    qtbot.mouseClick(panel.matrix_view, Qt.MouseButton.LeftButton, pos=QPoint(int(x), int(y)))
    qtbot.waitUntil(lambda: len(panel.gallery.shown_indices()) > 0, timeout=WAIT)
    # Re-evaluating the last checkpoint on the CPU gives the worker's own final matrix.
    assert np.array_equal(panel.matrix_view.matrix(), epoch_matrix)
    assert len(panel.gallery.shown_indices()) == min(epoch_matrix[t, t], 60)
    title = panel.gallery.title()          # says whose predictions these are
    assert title.startswith(f"true {t}, predicted {t} (") and f"checkpoint, epoch 2): {epoch_matrix[t, t]} samples" in title


def test_a_cell_clicked_while_the_run_holds_its_epochs_checkpoint_asks_the_worker_to_write_it(qtbot, controller):
    """Short epochs: the worker holds each epoch's checkpoint between writes (checkpoints.every_s, 5 s). A click
    on the live matrix asks for the write, and the samples come from the epoch written while the run goes on,
    though epochs end faster than the write and the re-evaluation (it once needed epochs of ~1 s)."""
    spec = _spec(400, "held")
    spec["checkpoints"] = {"every_s": 3600}   # held until asked, however slow a loaded machine makes the epochs
    controller.start(spec)
    session, panel = controller.session, controller.dashboard.confusion
    written = []
    session.bridge.checkpoint.connect(written.append)
    qtbot.waitUntil(lambda: "epoch" in panel.caption.text(), timeout=WAIT)   # an epoch's matrix is shown
    assert not written                                 # nothing written until asked
    qtbot.mouseClick(panel.matrix_view, Qt.MouseButton.LeftButton, pos=QPoint(*map(int, panel.matrix_view.cell_center(0, 0))))
    qtbot.waitUntil(lambda: "checkpoint, epoch" in panel.gallery.title(), timeout=WAIT)
    epoch = int(panel.gallery.title().split("checkpoint, epoch ")[1].split(")")[0])
    assert session.is_running() and epoch in {e.epoch for e in written}
    with qtbot.waitSignal(session.ended, timeout=WAIT):
        session.stop()


def test_a_cell_of_an_epoch_without_its_checkpoint_shows_no_other_epochs_samples(qtbot, controller):
    """Only a best checkpoint, at epoch 1 (no last ones; no epoch beats a min_delta of 0.9): the matrix
    shown is epoch 2's, so a click says epoch 2 kept no checkpoint (it once showed epoch 1's samples
    and swapped the matrix under the user's click)."""
    spec = _spec(2, "no-last") | {"checkpoints": {"last": False}, "early_stopping": {"min_delta": 0.9}}
    controller.start(spec)
    with qtbot.waitSignal(controller.session.ended, timeout=WAIT):
        pass
    panel = controller.dashboard.confusion
    shown = panel.matrix_view.matrix().copy()
    assert panel.caption.text().endswith("epoch 2)")
    x, y = panel.matrix_view.cell_center(0, 0)
    qtbot.mouseClick(panel.matrix_view, Qt.MouseButton.LeftButton, pos=QPoint(int(x), int(y)))
    assert controller.session.wait_predictions()
    qtbot.waitUntil(lambda: "no checkpoint of epoch 2" in panel.gallery.title(), timeout=WAIT)   # the click's answer
    assert np.array_equal(panel.matrix_view.matrix(), shown)
    assert panel.gallery.shown_indices() == []


def test_closing_lets_the_run_finish_in_the_background_and_it_shows_next_time(qtbot, controller, tmp_path):
    from studio.training.controller import TrainingController

    # six epochs: the run must outlive this studio's shutdown (it waits for its background tasks) for the
    # next studio to find it going; three ended first once under a loaded full run
    controller.start(_spec(6, "background"))
    qtbot.waitUntil(lambda: controller.session.bridge.run_id is not None, timeout=WAIT)
    run_id = controller.session.bridge.run_id
    assert controller.close_request(ask=lambda: BACKGROUND)
    controller.shutdown()
    # The next studio: its dashboard follows the run live from the store (not "No run yet"), and
    # a fresh runs dock finds it going, then completed.
    after = TrainingController(lambda: load_graph(DIGITS_CNN), db_url=controller.db_url,
                               work_dir=tmp_path / "after")
    qtbot.addWidget(after.dashboard)
    assert after.follower is not None and after.follower.run_id == run_id
    assert f"run {run_id}" in after.dashboard.title.text() and "background" in after.dashboard.title.text()
    assert not after.dashboard.pause_button.isEnabled()     # its stdin is the first studio's
    loss = after.dashboard.plots["loss"]
    qtbot.waitUntil(lambda: after.dashboard.flush(True) or "train" in loss.curve_names(), timeout=WAIT)
    store = RunStore(controller.db_url)
    panel = RunsPanel(store)
    qtbot.addWidget(panel)
    assert panel.row(run_id).status in ("running", "completed")
    qtbot.waitUntil(lambda: panel.refresh() or panel.row(run_id).status == "completed", timeout=WAIT)
    qtbot.waitUntil(lambda: after.dashboard.state.text().startswith("completed"), timeout=WAIT)
    assert after.dashboard.epochs.rowCount() == 6              # every epoch, read from the store
    panel.timer.stop()
    after.shutdown()
    store.close()


def test_closing_can_stop_the_run(qtbot, controller):
    controller.start(_spec(60, "stop on close"))
    qtbot.waitUntil(lambda: controller.dashboard.clock.done > 0, timeout=WAIT)
    run_id = controller.session.bridge.run_id
    assert controller.close_request(ask=lambda: STOP)
    assert not controller.session.is_running()
    assert RunStore(controller.db_url).run(run_id).status == "stopped"
