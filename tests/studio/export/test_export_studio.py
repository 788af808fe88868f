"""The Export menu and one-click "Export ONNX" button on a real main window (offscreen)."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from tests.exporters.export_graphs import TEMPLATES

pytestmark = [pytest.mark.qt, pytest.mark.export]


class NoQuestions:
    """The studio must not ask anything during these tests."""

    def __getattr__(self, name: str):
        raise AssertionError(f"the studio asked {name}")


@pytest.fixture
def window(qapp, tmp_path):
    from studio.app import build
    from studio.settings import StudioSettings

    style, palette, sheet = qapp.style().name(), qapp.palette(), qapp.styleSheet()
    win = build(qapp, StudioSettings.at(tmp_path / "settings.ini"), NoQuestions(), tmp_path / "recovery",
                autosave_ms=3_600_000, runs_db=f"sqlite:///{tmp_path / 'runs.sqlite'}")
    win.show()
    yield win
    win.document.undo_stack.setClean()
    win.close()
    win.deleteLater()
    qapp.setStyleSheet(sheet)
    qapp.setPalette(palette)
    qapp.setStyle(style)


def test_one_click_exports_the_graph_being_edited(qtbot, window, tmp_path):
    hook = window.export   # installed through the window's port by studio.app.build
    hook.export_dir = lambda: tmp_path / "exports"
    assert hook.actions["onnx"] in window.toolbar.actions()
    assert window.files.open(TEMPLATES / "lenet5.graph.json")
    with qtbot.waitSignal(hook.actions["onnx"].triggered):
        hook.actions["onnx"].trigger()
    dialog = hook.dialogs[-1]
    with qtbot.waitSignal(dialog.exported, timeout=180_000) as blocker:
        pass
    assert blocker.args == [True], dialog.status.text()
    assert Path(dialog.report.path) == tmp_path / "exports" / "lenet_5.onnx"
    assert "verified" in dialog.verdict.text()
    dialog.grab().save(str(tmp_path / "dialog.png"))


def test_the_menu_knows_what_needs_a_run(qtbot, window, tmp_path):
    hook = window.export
    hook.export_dir = lambda: tmp_path
    bar = window.menuBar()
    title = next(a for a in bar.actions() if a.menu() is hook.menu)
    QTest.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.actionGeometry(title).center())   # open Export
    qtbot.waitUntil(hook.menu.isVisible, timeout=5000)
    hook.menu.close()
    assert not hook.actions["tensorboard"].isEnabled()
    assert "needs a run" in hook.actions["tensorboard"].toolTip()
    assert hook.actions["onnx"].isEnabled() and hook.actions["python"].isEnabled()


@pytest.mark.process
def test_one_click_ships_the_best_checkpoint_of_the_newest_completed_run_and_says_which(qtbot, window, tmp_path):
    """A run of the same graph stopped after the completed one (only its last weights) does not displace
    the completed run's best checkpoint; the dialog names the run, the checkpoint and its metric."""
    from tests.trainer.helpers import run_worker, write_spec
    from trainer.store.runs import RunStore

    db = window.export.db_url
    code, _, err = run_worker(write_spec(tmp_path, train={"epochs": 2, "batch_size": 64}), db)
    assert code == 0, err
    store = RunStore(db)
    done = store.runs()[-1]
    best = next(c for c in reversed(store.checkpoints(done.id)) if c.kind == "best")
    last = store.checkpoint_path(done.id, "last")
    stopped = store.create_run(name="stopped", spec=done.spec, graph=done.graph, graph_hash=done.graph_hash,
                               device="cpu", params=done.params)
    store.add_checkpoint(stopped, "last", str(last), 5, 1, None)
    store.finish(stopped, "stopped")
    store.close()
    hook = window.export
    hook.export_dir = lambda: tmp_path / "exports"
    hook.current_run = lambda: stopped        # the run this window started last was stopped midway
    hook.actions["onnx"].trigger()
    dialog = hook.dialogs[-1]
    with qtbot.waitSignal(dialog.exported, timeout=180_000) as blocker:
        pass
    assert blocker.args == [True], dialog.status.text()
    said = dialog.status.text()
    assert said.startswith(f"run {done.id} ") and f"best checkpoint from epoch {best.epoch}, step {best.step}" in said
    assert f"({done.best_metric} {best.metric:.4g})" in said, said
    assert "untrained" not in dialog.verdict.text()
    dialog.grab().save(str(tmp_path / "one_click.png"))
