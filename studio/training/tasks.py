"""Run a plain function off the GUI thread and get its result back as a Qt signal.

Used for work that may take a while but needs no process of its own: reading a dataset for the
preview, re-evaluating a checkpoint on the CPU for the confusion-matrix samples. The function
must not touch Qt widgets; its result or its error message arrives on the GUI thread.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from typing import Any

import shiboken6
from PySide6.QtCore import QCoreApplication, QObject, QThread, Signal, Slot

from graph_editor.ui.background import pause_collection, resume_collection

_IMPORTS = threading.Lock()
TRAINER_MODULES = ("torch._dynamo", "torchvision.transforms.v2", "trainer.checks", "trainer.memory.doctor",
                   "trainer.data.images.preview")


def import_trainer() -> None:
    """Import the trainer's modules, one thread at a time. Two background tasks importing torch's
    packages at once (the dataset preview and the memory prediction as the Train dialog opens) left
    one with ``KeyError: 'torch._dynamo'``; once imported, this costs nothing."""
    with _IMPORTS:
        for name in TRAINER_MODULES:
            importlib.import_module(name)


class _Runner(QThread):
    done = Signal(object)
    error = Signal(str)

    def __init__(self, fn: Callable[[], Any], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._fn = fn

    def run(self) -> None:
        try:
            result = self._fn()
        except Exception as exc:  # noqa: BLE001 - any failure becomes a message for the user
            self.error.emit(f"{type(exc).__name__}: {exc}" if not isinstance(exc, ValueError) else str(exc))
            return
        self.done.emit(result)


class _Keeper(QObject):
    """Holds every started thread until it has finished, whoever owned its task: Qt aborts the process
    (qFatal) when a QThread is destroyed while it runs, which deleting a window or dialog whose memory
    prediction was still running did. The application waits for the rest as it quits."""

    def __init__(self) -> None:
        super().__init__()
        self.running: set[_Runner] = set()
        app = QCoreApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.wait_all)

    def keep(self, runner: _Runner) -> None:
        """Hold ``runner`` (about to start) until it finishes; Python's automatic garbage collection waits
        for it: run on its thread, the collector destroyed the GUI's garbage Qt objects there while the
        GUI thread painted them (a segfault, seen in CI as the Inspect capture built its modules)."""
        self.running.add(runner)
        pause_collection(runner)
        runner.finished.connect(self._finished)    # queued: the keeper lives on the GUI thread

    @Slot()
    def _finished(self) -> None:
        runner = self.sender()
        if isinstance(runner, _Runner):
            self.running.discard(runner)    # its task, while it lives, still holds it (is_running, wait)
            resume_collection(runner)

    @Slot()
    def wait_all(self, ms: int = 60_000) -> None:
        for runner in list(self.running):
            if runner.wait(ms):
                resume_collection(runner)


_KEEPER: _Keeper | None = None


def _keeper() -> _Keeper:
    global _KEEPER
    if _KEEPER is None:
        _KEEPER = _Keeper()
    return _KEEPER


class BackgroundTask(QObject):
    """One function running on a QThread; ``done(result)`` or ``error(message)`` on the GUI thread.

    Keep a reference while it runs; ``wait()`` blocks until it ends (tests, shutdown). The thread is not
    the task's child: deleting the task (or its parent) while the function runs drops its result, and
    the thread ends on its own.
    """

    done = Signal(object)
    error = Signal(str)

    def __init__(self, fn: Callable[[], Any], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._thread = _Runner(fn)
        self._thread.done.connect(self.done)
        self._thread.error.connect(self.error)

    def start(self) -> BackgroundTask:
        _keeper().keep(self._thread)
        self._thread.start()
        return self

    def is_running(self) -> bool:
        return shiboken6.isValid(self._thread) and self._thread.isRunning()

    def wait(self, ms: int = 60_000) -> bool:
        # Qt deletes a finished thread's object as the application goes (a window's shutdown then asked
        # it and raised "Internal C++ object (_Runner) already deleted"): a thread gone has ended
        return not shiboken6.isValid(self._thread) or self._thread.wait(ms)


def predict_checkpoint(spec: dict[str, Any], checkpoint: str) -> Any:
    """:func:`trainer.metrics.confusion_cells.predict_validation`, for a BackgroundTask: torch is imported
    here, on the background thread, the first time samples are asked for."""
    from trainer.metrics.confusion_cells import predict_validation

    return predict_validation(spec, checkpoint)
