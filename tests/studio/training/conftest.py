"""Fixtures for the training GUI tests: a controller over a real SQLite store, real workers."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

import pytest

from graph_editor.model.serialize import load_graph
from studio.training.devices import cpu_device
from trainer.store.liveness import process_alive, process_started

ROOT = Path(__file__).resolve().parents[3]
DIGITS_CNN = ROOT / "assets" / "templates" / "digits_cnn.graph.json"


@pytest.fixture
def controller(qtbot, tmp_path):
    """A TrainingController installed in a window; every worker it started is gone afterwards."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QMainWindow

    from studio.training.controller import TrainingController

    graph = load_graph(DIGITS_CNN)
    ctl = TrainingController(lambda: graph, db_url=f"sqlite:///{tmp_path / 'runs.sqlite'}",
                             work_dir=tmp_path / "launches", devices=[cpu_device()])
    win = QMainWindow()
    win.resize(1400, 900)
    ctl.install(lambda dock: win.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, dock) or dock.hide(),
                win.statusBar().showMessage)
    qtbot.addWidget(win)
    win.show()
    pids: list[tuple[int, int]] = []
    start = ctl.start

    def tracked(spec, *predicted):        # predicted: the Train dialog's peak and its unmodelled bytes
        pid = start(spec, *predicted)
        if isinstance(pid, int) and pid > 1:  # killpg(1) is kill(-1): every process the user may signal
            pids.append((pid, process_started(pid)))
        return pid

    ctl.start = tracked
    yield ctl
    ctl.shutdown()
    for pid, started in pids:
        # only a worker still alive as itself: an ended worker's number may belong to another test's process
        # by now (pid_max is often 32768, and the suite starts thousands of processes)
        if pid > 1 and pid != os.getpid() and process_alive(pid, started):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)

