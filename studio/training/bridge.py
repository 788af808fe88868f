"""The worker process as Qt signals: a thin adapter over :class:`trainer.protocol.client.WorkerClient`.

The client runs ``python -m trainer run SPEC --db URL`` in a session of its own (so it can outlive
the studio: "let it finish in the background"), a little below the studio's priority, with stderr
in a log file whose tail is the reason given when the process dies without saying why; its reader
thread never reads more than a bounded amount ahead, and while it runs Python's garbage collector runs
on the GUI thread only (:func:`graph_editor.ui.background.start_thread`). Every ``POLL_MS`` this adapter takes the
client's parsed events for at most ``SLICE_S`` and emits them as typed signals (the dataclasses of
:mod:`trainer.protocol.events`), so a flood of events can never stall the event loop.
"""

from __future__ import annotations

import os
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from graph_editor.ui.background import start_thread
from trainer.protocol import events as ev
from trainer.protocol.client import WorkerClient

POLL_MS = 25           # the GUI thread takes the worker's events this often...
SLICE_S = 0.006        # ...and spends at most this long on them per turn of the event loop
WORKER_NICE = 5


class WorkerBridge(QObject):
    """One worker process at a time. Signals carry the typed events of :mod:`trainer.protocol.events`.

    ``event`` carries every event (an :class:`~trainer.protocol.events.UnknownEvent` from a newer worker
    too), before its own signal. ``crashed(reason)`` is emitted when the process ends without a
    ``finished`` or ``failed`` event (killed, segfault, out of host memory); ``exited(code)`` always
    comes last.
    """

    # shadows QObject.event(QEvent) (an attribute, so Qt's event delivery is unaffected); renaming the
    # signal is an API change for its listeners
    event = Signal(object)  # type: ignore[assignment]  # ev.Event
    run_started = Signal(object)    # ev.RunStarted
    compile_progress = Signal(object)   # ev.CompileProgress
    compile_done = Signal(object)   # ev.CompileDone
    metrics = Signal(object)        # ev.Metrics
    epoch_end = Signal(object)      # ev.EpochEnd
    memory = Signal(object)         # ev.Memory
    checkpoint = Signal(object)     # ev.Checkpoint
    memory_trace = Signal(object)   # ev.MemoryTimeline
    state_changed = Signal(object)  # ev.State
    finished = Signal(object)       # ev.Finished
    failed = Signal(object)         # ev.Failed
    crashed = Signal(str)
    exited = Signal(int)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.client: WorkerClient | None = None
        self._poll = QTimer(self, interval=POLL_MS)
        self._poll.timeout.connect(self._drain)
        self._signals: dict[type[ev.Event], Any] = {
            ev.RunStarted: self.run_started, ev.CompileProgress: self.compile_progress,
            ev.CompileDone: self.compile_done, ev.Metrics: self.metrics,
            ev.EpochEnd: self.epoch_end, ev.Memory: self.memory, ev.Checkpoint: self.checkpoint,
            ev.State: self.state_changed, ev.Finished: self.finished, ev.Failed: self.failed,
            ev.MemoryTimeline: self.memory_trace}

    # ----------------------------------------------------------------- process
    def start(self, spec_path: str | os.PathLike[str], db_url: str, log_path: str | os.PathLike[str],
              *, cwd: str | os.PathLike[str] | None = None, command: list[str] | None = None,
              predicted_peak: int | None = None) -> int:
        """Start the worker (``command`` replaces the real one, for benchmarks); returns its pid.
        ``predicted_peak``: the Train dialog's prediction of this spec, handed to the worker's memory
        gate so that the run is predicted once."""
        old = self.client
        if old is not None and old.is_running():
            if not old.ended:
                raise RuntimeError("this bridge already runs a worker")
            old.wait(timeout=30)  # it reported its end and is exiting
        given = ["--predicted-peak", str(predicted_peak)] if predicted_peak is not None else []
        self.client = WorkerClient(["run", str(spec_path), "--db", db_url, *given], command=command, log_path=log_path,
                                   cwd=cwd, own_session=True, nice=WORKER_NICE, start_thread=start_thread)
        self._poll.start()
        return self.client.pid

    @property
    def pid(self) -> int | None:
        return self.client.pid if self.client else None

    @property
    def run_id(self) -> int | None:
        return self.client.run_id if self.client else None

    @property
    def bad_lines(self) -> int:
        """stdout lines of the current worker that were not events."""
        return self.client.bad_lines if self.client else 0

    def is_running(self) -> bool:
        """The worker process is alive (it may have reported its end and be exiting)."""
        return self.client is not None and self.client.is_running()

    @property
    def ended(self) -> bool:
        """A ``finished`` or ``failed`` event has arrived: the run is over."""
        return self.client is not None and self.client.ended

    def send(self, command: ev.Command) -> bool:
        """Write one command to the worker; False when it is gone."""
        return self.client is not None and self.client.send(command)

    def pause(self) -> bool:
        return self.send(ev.Pause())

    def resume(self) -> bool:
        return self.send(ev.Resume())

    def stop(self) -> bool:
        """Ask for a clean stop: the worker checkpoints and ends with ``finished`` status stopped."""
        return self.send(ev.Stop())

    def set_lr(self, lr: float) -> bool:
        try:
            return self.send(ev.SetLr(lr=lr))
        except ev.CommandError:
            return False

    def write_checkpoints(self) -> bool:
        """Ask the worker to write the checkpoints it holds (``checkpoints.every_s``); ``checkpoint`` events answer."""
        return self.send(ev.WriteCheckpoints())

    def record_memory(self) -> bool:
        """Ask for the next two training steps' allocations; a ``memory_trace`` event answers."""
        return self.send(ev.RecordMemory())

    def terminate(self) -> None:
        """SIGTERM: the worker treats it as stop (checkpoint, then end)."""
        if self.client is not None:
            self.client.terminate()

    def detach(self) -> None:
        """Let the worker run on without us and stop emitting signals. It is in its own session, so
        it survives the studio's exit; it keeps writing to the run store, where the runs dock finds
        it next time."""
        self._poll.stop()
        if self.client is not None:
            self.client.detach()

    def crash_reason(self, code: int) -> str:
        """Why the worker ended without saying why: exit status or signal, and its last stderr lines."""
        return self.client.crash_reason(code) if self.client else f"the worker process exited with status {code}"

    # ------------------------------------------------------------------ reading
    def _drain(self) -> None:
        """GUI thread, every POLL_MS: emit the client's events for at most SLICE_S.

        Polling (rather than a signal per chunk) coalesces bursts: however fast the worker
        writes, the GUI spends at most SLICE_S of every POLL_MS on its events.
        """
        client = self.client
        if client is None:
            return
        for event in client.poll(SLICE_S):
            self.event.emit(event)
            signal = self._signals.get(type(event))
            if signal is not None:
                signal.emit(event)
        code = client.exit_code
        if code is not None and self._poll.isActive():   # reported once
            self._poll.stop()
            if not client.ended:
                self.crashed.emit(client.crash_reason(code))
            self.exited.emit(code)

