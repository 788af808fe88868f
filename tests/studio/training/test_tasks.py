"""BackgroundTask: a function off the GUI thread whose thread outlives whatever owned the task."""

from __future__ import annotations

import gc
import threading

import pytest
from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QApplication, QWidget

from studio.training.tasks import BackgroundTask

pytestmark = pytest.mark.qt


def test_deleting_the_owner_of_a_running_task_does_not_abort_and_drops_its_result(qapp, qtbot):
    """Qt aborts the process when a QThread is destroyed while it runs: a test's window deleted with the
    Train dialog's memory prediction still running did (``Fatal Python error: Aborted``)."""
    release, ran = threading.Event(), threading.Event()

    def work() -> str:
        ran.set()
        release.wait(30)
        return "late"

    owner = QWidget()
    task = BackgroundTask(work, owner)
    results: list[object] = []
    task.done.connect(results.append)
    destroyed = threading.Event()
    task.destroyed.connect(lambda *_: destroyed.set())
    task.start()
    assert ran.wait(30)
    owner.deleteLater()
    QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    assert destroyed.is_set()           # the task went with its owner, its function still running
    assert task.is_running()
    release.set()
    assert task.wait(30_000)
    qtbot.waitUntil(lambda: not task.is_running(), timeout=5_000)
    QApplication.processEvents()
    assert results == []                # nobody is left to take the result


def test_a_task_delivers_its_result_and_its_error_on_the_gui_thread(qapp, qtbot):
    owner = QObject()
    good, bad = BackgroundTask(lambda: 42, owner), BackgroundTask(lambda: 1 / 0, owner)
    got: list[object] = []
    good.done.connect(got.append)
    bad.error.connect(got.append)
    with qtbot.waitSignals([good.done, bad.error], timeout=10_000):
        good.start()
        bad.start()
    assert sorted(map(str, got)) == ["42", "ZeroDivisionError: division by zero"]


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_while_a_task_runs_python_collects_garbage_on_the_gui_thread_only(qapp, qtbot):
    """CI segfaulted with the Inspect capture building its modules on a task's thread: Python's collector
    runs in whichever thread allocates, and there it destroyed the GUI's garbage Qt objects while the GUI
    thread used them. While a task runs the GUI thread collects in its place (the garbage the task makes
    included), and automatic collection is back as it was once the task ends."""
    was_enabled = gc.isenabled()
    on_gui: list[bool] = []

    def seen(phase: str, info: dict) -> None:
        if phase == "start":
            on_gui.append(threading.current_thread() is threading.main_thread())

    collected = threading.Event()

    def work() -> int:
        for _ in range(100_000):   # garbage cycles: over a hundred collections' worth at the default threshold
            _Cycle()
        return 0 if collected.wait(30) else 1

    gc.callbacks.append(seen)
    try:
        owner = QObject()
        task = BackgroundTask(work, owner)
        with qtbot.waitSignal(task.done, timeout=60_000) as done:
            task.start()
            qtbot.waitUntil(lambda: on_gui.count(True) > 0, timeout=30_000)
            collected.set()
        qtbot.waitUntil(lambda: gc.isenabled() == was_enabled, timeout=10_000)
    finally:
        gc.callbacks.remove(seen)
    assert done.args == [0]
    assert all(on_gui), f"{on_gui.count(False)} of {len(on_gui)} collections ran on the task's thread"
