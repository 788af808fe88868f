"""Work off the GUI thread where only the newest request counts (the live analysis of an edited graph).

:class:`NewestOnly` runs one plain function at a time on a Python thread and hands its result to a
callback on the GUI thread, but only the result of the newest request: each :meth:`NewestOnly.submit`
bumps a generation counter, a request still waiting when a newer one comes is dropped unrun, and a
result that comes back after a newer request was made is dropped (the thread is not interrupted: it
finishes, then starts the newest request). The worker thread touches no Qt object: the GUI thread
polls for the result with a short timer.

While a request runs, Python's automatic garbage collection is paused (and resumed on the GUI thread
when its result is collected): the collector runs in whichever thread allocates, and the worker
allocates constantly, so it collected the GUI's garbage widgets and scenes there -- Qt objects destroyed
off the GUI thread while the GUI thread used them ("pure virtual method called", an abort, seen in the
canvas tests). While anything runs off the GUI thread (:func:`pause_collection`: these runners, the
studio's background tasks, an export), a timer on the GUI thread collects in its place, as Python would
have (the same thresholds), so a long run does not pile up garbage.
:func:`collection_paused` pauses it the same way on the GUI thread while a big graph's items are built:
each automatic collection walks every object made so far, which took a quarter of opening a
20,000-layer graph (1.1 of 3.5 s).
"""

from __future__ import annotations

import atexit
import gc
import threading
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any

from PySide6.QtCore import QCoreApplication, QObject, QTimer

POLL_MS = 15  # how often a finished result is looked for: well under a frame of latency
EXIT_WAIT_S = 15.0  # the most the interpreter's exit waits for a running request (torch mid-call could crash it)

COLLECT_MS = 500  # how often the GUI thread collects while automatic collection is paused

_ALIVE: weakref.WeakSet[NewestOnly] = weakref.WeakSet()
_RUNNING: set[object] = set()   # runners whose thread runs, and bulk builds: the GC is paused while any is
_BLOCKS: set[object] = set()    # bulk builds on the GUI thread: the GUI thread's collector waits for them too
_gc_was_enabled = False
_frozen = False   # freeze_survivors() ran and thaw() has not
_collector: QTimer | None = None


def pause_collection(holder: object) -> None:
    """No automatic garbage collection until :func:`resume_collection` (``holder``) is called (on the GUI
    thread, where it must be called too): in the meantime the GUI thread collects on a timer."""
    global _gc_was_enabled
    if not _RUNNING:
        _gc_was_enabled = gc.isenabled()
        gc.disable()
    _RUNNING.add(holder)
    _collect_on_gui_thread()


def resume_collection(holder: object) -> None:
    if holder in _RUNNING:
        _RUNNING.discard(holder)
        if not _RUNNING:
            if _collector is not None:
                _collector.stop()
            if _gc_was_enabled:
                gc.enable()


def start_thread(thread: threading.Thread) -> None:
    """Start ``thread`` (a plain Python thread) with automatic collection paused until it ends, which the
    GUI thread looks for; without an application (no GUI objects to protect) it just starts it."""
    app = QCoreApplication.instance()
    if app is None or threading.current_thread() is not threading.main_thread():
        thread.start()
        return
    pause_collection(thread)
    thread.start()
    poll = QTimer(app, interval=POLL_MS * 4)

    def ended() -> None:
        if not thread.is_alive():
            poll.stop()
            poll.deleteLater()
            resume_collection(thread)

    poll.timeout.connect(ended)
    poll.start()


def _collect_on_gui_thread() -> None:
    """Start the GUI thread's collector (made once, on the application; not from another thread)."""
    global _collector
    app = QCoreApplication.instance()
    if app is None or threading.current_thread() is not threading.main_thread():
        return
    if _collector is None:
        _collector = QTimer(app, interval=COLLECT_MS)
        _collector.timeout.connect(_collect_due)
        _collector.destroyed.connect(_collector_gone)
    if not _collector.isActive():
        _collector.start()


def _collector_gone() -> None:
    global _collector
    _collector = None


def _collect_due() -> None:
    """What Python's automatic collection would have done since the last call, on the GUI thread: the
    youngest generation once its allocations pass the threshold, an older one once enough younger
    collections have happened."""
    if _BLOCKS or not _RUNNING:
        return
    counts, limits = gc.get_count(), gc.get_threshold()
    if limits[0] == 0:   # gc.set_threshold(0): automatic collection was turned off on purpose
        return
    generation = -1
    while generation < 2 and counts[generation + 1] > limits[generation + 1]:
        generation += 1
    if generation >= 0:
        gc.collect(generation)


@contextmanager
def collection_paused() -> Iterator[None]:
    """No automatic garbage collection while the block runs (on the GUI thread: building thousands of
    items, which make no garbage cycles worth collecting); resumed after it unless a runner still runs."""
    token = object()
    pause_collection(token)
    _BLOCKS.add(token)
    try:
        yield
    finally:
        _BLOCKS.discard(token)
        resume_collection(token)


def freeze_survivors() -> None:
    """Leave every object alive now out of the automatic collections (``gc.freeze``): a big graph's
    items live as long as the graph is shown, and each collection walked them all. Their reference
    cycles are broken when they are dropped, so refcounting frees them; :func:`thaw` undoes this."""
    global _frozen
    gc.freeze()
    _frozen = True


def thaw() -> None:
    """Put what :func:`freeze_survivors` left out back into the collector's care."""
    global _frozen
    if _frozen:
        gc.unfreeze()
        _frozen = False


class NewestOnly:
    """A single-thread queue of length one. ``on_done(result)`` is called on the GUI thread for the newest
    request only (``result`` is the exception when the function raised); ``on_dropped(generation)`` for a
    result that came back stale."""

    def __init__(self, name: str, owner: QObject, on_done: Callable[[Any], None],
                 on_dropped: Callable[[int], None] | None = None) -> None:
        self.name = name
        self.generation = 0
        self.on_done, self.on_dropped = on_done, on_dropped
        self._running: tuple[int, Future[Any], threading.Thread] | None = None
        self._waiting: tuple[int, Callable[[], Any]] | None = None
        self._poll = QTimer(owner, interval=POLL_MS)
        self._poll.timeout.connect(self._collect)
        owner.destroyed.connect(lambda *_: resume_collection(self))   # its timer went with it: nothing collects
        _ALIVE.add(self)

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
        """Block until the running request's thread ends (tests, exit); its result is collected at the
        next poll. Returns False on timeout."""
        running = self._running
        if running is None:
            return True
        running[2].join(timeout_s)
        return not running[2].is_alive()

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
        pause_collection(self)
        thread.start()
        self._poll.start()

    def _collect(self) -> None:
        if self._running is None or not self._running[1].done():
            return
        generation, future, _ = self._running
        self._running = None
        resume_collection(self)
        if self._waiting is not None:
            self._start_waiting()
        else:
            self._poll.stop()
        if generation != self.generation:
            if self.on_dropped is not None:
                self.on_dropped(generation)
            return
        error = future.exception()
        self.on_done(error if error is not None else future.result())


@atexit.register
def _wait_for_running() -> None:
    for runner in list(_ALIVE):
        runner.cancel()
        runner.wait(EXIT_WAIT_S)
