"""The worker process as Qt signals: the only place the studio talks to a training process.

``python -m trainer run SPEC --db URL`` runs as a child in its own session, so it can outlive the
studio ("let it finish in the background"): the worker ignores a closed stdin/stdout and keeps
writing to the run store. A reader thread blocks on the worker's stdout, parses each JSON line
(see :mod:`trainer.events`) and queues it; the GUI thread drains the queue in slices of at most
``SLICE`` events, so a flood of events can never stall the event loop. Its stderr goes to a log
file, whose tail is the reason given when the process dies without saying why.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections import deque
from pathlib import Path
from typing import IO, Any

from PySide6.QtCore import QObject, QTimer, Signal

from trainer import events as ev

SLICE = 500            # events handled per turn of the event loop
LOG_TAIL_LINES = 12    # stderr lines quoted in a crash reason


def worker_command(spec_path: str | os.PathLike[str], db_url: str) -> list[str]:
    """The command line that runs one training job (the same a user can type in a terminal)."""
    return [sys.executable, "-m", "trainer", "run", str(spec_path), "--db", db_url]


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` non-empty lines of a log file ('' when it is missing)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join([ln for ln in text.splitlines() if ln.strip()][-lines:])


class WorkerBridge(QObject):
    """One worker process. Signals carry the event dicts of :mod:`trainer.events` unchanged.

    ``crashed(reason)`` is emitted when the process ends without a ``finished`` or ``failed``
    event (killed, segfault, out of host memory); ``exited(code)`` always comes last.
    """

    event = Signal(dict)          # every event, before the specific signal
    run_started = Signal(dict)
    compile_done = Signal(dict)
    metrics = Signal(dict)
    epoch_end = Signal(dict)
    memory = Signal(dict)
    checkpoint = Signal(dict)
    state_changed = Signal(dict)
    finished = Signal(dict)
    failed = Signal(dict)
    crashed = Signal(str)
    exited = Signal(int)
    _wake = Signal()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._proc: subprocess.Popen[bytes] | None = None
        self._queue: deque[dict[str, Any] | int] = deque()
        self._wake_pending = threading.Event()
        self._ended = False           # a finished or failed event arrived
        self._log_path: Path | None = None
        self._detached = False
        self.run_id: int | None = None
        self.bad_lines = 0
        self._signals = {ev.RUN_STARTED: self.run_started, ev.COMPILE_DONE: self.compile_done,
                         ev.METRICS: self.metrics, ev.EPOCH_END: self.epoch_end, ev.MEMORY: self.memory,
                         ev.CHECKPOINT: self.checkpoint, ev.STATE: self.state_changed,
                         ev.FINISHED: self.finished, ev.FAILED: self.failed}
        self._wake.connect(self._drain)

    # ----------------------------------------------------------------- process
    def start(self, spec_path: str | os.PathLike[str], db_url: str, log_path: str | os.PathLike[str],
              *, cwd: str | os.PathLike[str] | None = None, command: list[str] | None = None) -> int:
        """Start the worker (``command`` replaces the real one, for benchmarks); returns its pid."""
        if self.is_running():
            raise RuntimeError("this bridge already runs a worker")
        self._log_path = Path(log_path)
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        with open(self._log_path, "ab") as log:
            self._proc = subprocess.Popen(
                command or worker_command(spec_path, db_url), stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=log, cwd=cwd, env=env, start_new_session=True)
        self._ended = self._detached = False
        threading.Thread(target=self._read, args=(self._proc,), name="worker-reader", daemon=True).start()
        return self._proc.pid

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def send(self, command: str, **fields: Any) -> bool:
        """Write one command line to the worker; False when it is gone."""
        if not self.is_running() or self._proc is None or self._proc.stdin is None:
            return False
        try:
            self._proc.stdin.write((ev.encode_command(command, **fields) + "\n").encode())
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            return False
        return True

    def pause(self) -> bool:
        return self.send(ev.PAUSE)

    def resume(self) -> bool:
        return self.send(ev.RESUME)

    def stop(self) -> bool:
        """Ask for a clean stop: the worker checkpoints and ends with ``finished`` status stopped."""
        return self.send(ev.STOP)

    def set_lr(self, lr: float) -> bool:
        return self.send(ev.SET_LR, lr=float(lr))

    def terminate(self) -> None:
        """SIGTERM: the worker treats it as stop (checkpoint, then end)."""
        if self.is_running() and self._proc is not None:
            self._proc.terminate()

    def detach(self) -> None:
        """Let the worker run on without us: close our pipe ends and stop emitting signals.

        The worker is in its own session, so it survives the studio's exit; it keeps writing to
        the run store, where the runs dock finds it next time.
        """
        self._detached = True
        if self._proc is not None and self._proc.stdin is not None:
            with contextlib.suppress(OSError):
                self._proc.stdin.close()

    # ------------------------------------------------------------------ reading
    def _read(self, proc: subprocess.Popen[bytes]) -> None:
        """Reader thread: parse lines into the queue, wake the GUI thread once per batch."""
        stream: IO[bytes] = proc.stdout  # type: ignore[assignment]
        for raw in stream:
            try:
                obj = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                obj = None
            if isinstance(obj, dict) and isinstance(obj.get("event"), str):
                self._queue.append(obj)
            else:
                self.bad_lines += 1
            self._poke()
        self._queue.append(proc.wait())
        self._poke()

    def _poke(self) -> None:
        if not self._wake_pending.is_set():
            self._wake_pending.set()
            self._wake.emit()

    def _drain(self) -> None:
        """GUI thread: handle up to SLICE queued events, then yield to the event loop."""
        self._wake_pending.clear()
        for _ in range(SLICE):
            if not self._queue:
                return
            item = self._queue.popleft()
            if self._detached:
                continue
            if isinstance(item, int):
                self._on_exit(item)
            else:
                self._dispatch(item)
        if self._queue and not self._wake_pending.is_set():
            self._wake_pending.set()
            QTimer.singleShot(0, self._drain)

    def _dispatch(self, obj: dict[str, Any]) -> None:
        name = obj["event"]
        if name == ev.RUN_STARTED:
            self.run_id = obj.get("run_id")
        if name in (ev.FINISHED, ev.FAILED):
            self._ended = True
        self.event.emit(obj)
        signal = self._signals.get(name)
        if signal is not None:
            signal.emit(obj)

    def _on_exit(self, code: int) -> None:
        if not self._ended:
            self.crashed.emit(self.crash_reason(code))
        self.exited.emit(code)

    def crash_reason(self, code: int) -> str:
        """Why a worker that said nothing ended: its exit status or signal, and its last stderr."""
        if code < 0:
            try:
                what = f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                what = f"was killed by signal {-code}"
        else:
            what = f"exited with status {code} without reporting an end"
        tail = log_tail(self._log_path) if self._log_path else ""
        return f"the worker process {what}" + (f"\n{tail}" if tail else "")
