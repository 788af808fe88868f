"""Work off the GUI thread where only the newest request counts (the live analysis of an edited graph).

:class:`NewestOnly` runs one plain function at a time on a Python thread and hands its result back on
the GUI thread (``done``), but only the result of the newest request: each :meth:`NewestOnly.submit`
bumps a generation counter, a request still waiting when a newer one comes is dropped unrun, and a
result that comes back after a newer request was made is dropped (the thread is not interrupted: it
finishes, then starts the newest request). The function gets no Qt object; the result is polled from
the GUI thread with a short timer, so no Qt object is ever touched by the worker thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from PySide6.QtCore import QCoreApplication, QObject, QTimer, Signal

POLL_MS = 15  # how often a finished result is looked for: well under a frame of latency
QUIT_WAIT_S = 15.0  # the most the application's exit waits for a running request


class NewestOnly(QObject):
    """A single-thread queue of length one. ``done(generation, result)`` is emitted on the GUI thread for
    the newest request only (``result`` is the exception when the function raised);
    ``dropped(generation)`` for a result that came back stale."""

    done = Signal(int, object)
    dropped = Signal(int)

    def __init__(self, name: str, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.name = name
        self.generation = 0
        self._running: tuple[int, Future[Any], threading.Thread] | None = None
        self._waiting: tuple[int, Callable[[], Any]] | None = None
        self._poll = QTimer(self, interval=POLL_MS)
        self._poll.timeout.connect(self._collect)
        app = QCoreApplication.instance()
        if app is not None:  # a thread inside torch while the interpreter shuts down could crash it
            app.aboutToQuit.connect(self._on_quit)

    def submit(self, fn: Callable[[], Any]) -> int:
        """Run ``fn()`` off the GUI thread once the one running (if any) ends; returns its generation."""
        self.generation += 1
        self._waiting = (self.generation, fn)
        if self._running is None:
            self._start_waiting()
        return self.generation

    def cancel(self) -> None:
        """Forget every request: none waiting runs, a running one's result is dropped."""
        self.generation += 1
        self._waiting = None

    def busy(self) -> bool:
        """Whether a request is running or waiting."""
        return self._running is not None or self._waiting is not None

    def wait(self, timeout_s: float = 60.0) -> bool:
        """Block until the running request's thread ends (tests, shutdown); its result is collected
        at the next poll. Returns False on timeout."""
        if self._running is None:
            return True
        thread = self._running[2]
        thread.join(timeout_s)
        return not thread.is_alive()

    def _on_quit(self) -> None:
        self.cancel()
        self.wait(QUIT_WAIT_S)

    def _start_waiting(self) -> None:
        assert self._waiting is not None
        generation, fn = self._waiting
        self._waiting = None
        future: Future[Any] = Future()

        def work() -> None:
            try:
                future.set_result(fn())
            except BaseException as exc:  # noqa: BLE001 - handed to the GUI thread as the result's error
                future.set_exception(exc)

        thread = threading.Thread(target=work, name=f"{self.name}-{generation}", daemon=True)
        self._running = (generation, future, thread)
        thread.start()
        self._poll.start()

    def _collect(self) -> None:
        if self._running is None or not self._running[1].done():
            return
        generation, future, _ = self._running
        self._running = None
        if self._waiting is not None:
            self._start_waiting()
        else:
            self._poll.stop()
        if generation != self.generation:
            self.dropped.emit(generation)
            return
        error = future.exception()
        self.done.emit(generation, error if error is not None else future.result())
