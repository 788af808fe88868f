"""Store-then-emit off the training thread: metrics windows are written and announced by a thread.

The loop hands each metrics window to :class:`Recorder` and goes on training; the recorder writes the
rows to the run store, then emits the event, in order. So a reader that sees an event finds its
rows, and no SQLite commit or pipe write ever stalls a training step. An epoch's end (its rows, its
event, its checkpoint's file, record and event, its memory sample) goes the same way, in that order.
What the training thread writes or emits itself (a state change, the end of the run) calls
:meth:`flush` first, which keeps the event stream in order and raises any error the recorder met;
:meth:`check` raises it without waiting (each epoch's end).
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Iterator

Write = Callable[[], None]


class Recorder:
    def __init__(self) -> None:
        self._queue: queue.Queue[Write | None] = queue.Queue()
        self._error: BaseException | None = None
        self._batch: list[Write] | None = None
        self._thread = threading.Thread(target=self._run, name="trainer-recorder", daemon=True)
        self._thread.start()

    def submit(self, write: Write) -> None:
        """Run ``write`` (store rows, then emit) on the recorder thread, after everything submitted before."""
        if self._batch is not None:
            self._batch.append(write)
        else:
            self._queue.put(write)

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """The writes submitted inside go to the recorder thread together, in order, when the block ends:
        the thread's work (SQLite, serialisation: Python that holds the GIL) does not start while the
        submitting thread still has its own Python to run."""
        self._batch = []
        try:
            yield
        finally:
            self._release()
            self._batch = None

    def _release(self) -> None:
        """Hand what the open batch holds to the recorder thread."""
        for write in self._batch or ():
            self._queue.put(write)
        if self._batch:
            self._batch.clear()

    def flush(self) -> None:
        """Wait until every submitted write is done; re-raise the first error one of them met."""
        self._release()                   # inside a batch: what it holds goes first
        self._queue.join()
        self.check()

    def check(self) -> None:
        """Re-raise the first error a write met (the writes after it were skipped), without waiting."""
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                if self._error is None:
                    item()
            except BaseException as exc:  # noqa: BLE001 - handed to the training thread by flush()
                self._error = exc
            finally:
                item = None      # done: this thread holds no write (and nothing it closes over) while it waits
                self._queue.task_done()

