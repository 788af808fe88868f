"""BackgroundTask: a function off the GUI thread whose thread outlives whatever owned the task."""

from __future__ import annotations

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
