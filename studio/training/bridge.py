"""The worker process as Qt signals: the only place the studio talks to a training process.

``python -m trainer run SPEC --db URL`` runs as a child in its own session, so it can outlive the
studio ("let it finish in the background"): the worker ignores a closed stdin/stdout and keeps
writing to the run store. A reader thread blocks on the worker's stdout and queues raw bytes; every
``POLL_MS`` the GUI thread parses the JSON lines (see :mod:`trainer.events`) for at most ``SLICE_S``
and emits them as signals, so a flood of events can never stall the event loop (and a worker that
floods is slowed by its own full pipe). Its stderr goes to a log file, whose tail is the reason
given when the process dies without saying why.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from trainer import events as ev

POLL_MS = 25           # the GUI thread takes the worker's lines this often...
SLICE_S = 0.006        # ...and spends at most this long on them per turn of the event loop
CHUNK = 1 << 16        # bytes per read of the worker's stdout
MAX_PENDING_BYTES = 4 << 20  # read no further ahead of the GUI than this
WORKER_NICE = 5
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

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._proc: subprocess.Popen[bytes] | None = None
        self._feed: _Feed | None = None
        self._poll = QTimer(self, interval=POLL_MS)
        self._poll.timeout.connect(self._drain)
        self._ended = False           # a finished or failed event arrived
        self._log_path: Path | None = None
        self._detached = False
        self.run_id: int | None = None
        self.bad_lines = 0
        self._signals = {ev.RUN_STARTED: self.run_started, ev.COMPILE_DONE: self.compile_done,
                         ev.METRICS: self.metrics, ev.EPOCH_END: self.epoch_end, ev.MEMORY: self.memory,
                         ev.CHECKPOINT: self.checkpoint, ev.STATE: self.state_changed,
                         ev.FINISHED: self.finished, ev.FAILED: self.failed}

    # ----------------------------------------------------------------- process
    def start(self, spec_path: str | os.PathLike[str], db_url: str, log_path: str | os.PathLike[str],
              *, cwd: str | os.PathLike[str] | None = None, command: list[str] | None = None) -> int:
        """Start the worker (``command`` replaces the real one, for benchmarks); returns its pid."""
        if self.is_running() and self._proc is not None:
            if not self._ended:
                raise RuntimeError("this bridge already runs a worker")
            self._proc.wait(timeout=30)  # it reported its end and is exiting
        self._log_path = Path(log_path)
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        with open(self._log_path, "ab") as log:
            self._proc = subprocess.Popen(
                command or worker_command(spec_path, db_url), stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=log, cwd=cwd, env=env, start_new_session=True)
        _lower_priority(self._proc.pid)
        self._ended = self._detached = False
        self._feed = _Feed()
        threading.Thread(target=self._read, args=(self._proc, self._feed), name="worker-reader",
                         daemon=True).start()
        self._poll.start()
        return self._proc.pid

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def is_running(self) -> bool:
        """The worker process is alive (it may have reported its end and be exiting)."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def ended(self) -> bool:
        """A ``finished`` or ``failed`` event has arrived: the run is over."""
        return self._ended

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
        self._poll.stop()
        if self._proc is not None and self._proc.stdin is not None:
            with contextlib.suppress(OSError):
                self._proc.stdin.close()

    # ------------------------------------------------------------------ reading
    def _read(self, proc: subprocess.Popen[bytes], feed: _Feed) -> None:
        """Reader thread: move raw chunks of stdout into ``feed``; no parsing here.

        The thread spends its time blocked in ``os.read`` (GIL released), so it never competes with
        the GUI thread for the interpreter; when the GUI falls behind, it stops reading and the
        worker's own writes block instead: a flooding worker is slowed down, never the studio.
        """
        fd = proc.stdout.fileno()  # type: ignore[union-attr]
        while True:
            try:
                chunk = os.read(fd, CHUNK)
            except OSError:
                chunk = b""
            if not chunk or self._detached:
                break
            feed.put(chunk)
            feed.wait_below(MAX_PENDING_BYTES)
        if self._detached:
            # Nobody listens any more: close our end; the worker's next write fails quietly
            # and it trains on, writing to the run store only.
            with contextlib.suppress(OSError):
                proc.stdout.close()  # type: ignore[union-attr]
            return
        feed.close(proc.wait())

    def _drain(self) -> None:
        """GUI thread, every POLL_MS: parse and dispatch lines for at most SLICE_S.

        Polling (rather than a signal per chunk) coalesces bursts: however fast the worker
        writes, the GUI spends at most SLICE_S of every POLL_MS on its events.
        """
        feed = self._feed
        if feed is None:
            return
        deadline = time.perf_counter() + SLICE_S
        for line in feed.lines():
            self._handle_line(line)
            if time.perf_counter() > deadline:
                return
        if feed.exit_code is not None and not feed.has_lines():
            self._poll.stop()
            self._feed = None
            if not self._detached:
                self._on_exit(feed.exit_code)

    def _handle_line(self, raw: bytes) -> None:
        if self._detached or not raw.strip():
            return
        try:
            obj = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            obj = None
        if isinstance(obj, dict) and isinstance(obj.get("event"), str):
            self._dispatch(obj)
        else:
            self.bad_lines += 1

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


def _lower_priority(pid: int) -> None:
    """Run the worker a little below the studio (nice +WORKER_NICE): on a machine whose cores the
    training saturates, the GUI thread still gets the CPU when it needs it (a paint, a click);
    an idle GUI costs the worker nothing. Threads the worker starts later inherit it."""
    if hasattr(os, "setpriority"):
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, pid, os.getpriority(os.PRIO_PROCESS, pid) + WORKER_NICE)


class _Feed:
    """Bytes read from the worker, split into lines on the GUI thread; shared with the reader thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)
        self._chunks: list[bytes] = []
        self._lines: deque[bytes] = deque()
        self._partial = b""
        self._pending = 0
        self.exit_code: int | None = None

    def put(self, chunk: bytes) -> None:
        with self._lock:
            self._chunks.append(chunk)
            self._pending += len(chunk)

    def wait_below(self, limit: int) -> None:
        with self._room:
            self._room.wait_for(lambda: self._pending < limit, timeout=1.0)

    def close(self, code: int) -> None:
        with self._lock:
            self.exit_code = code

    def _take(self) -> None:
        with self._lock:
            chunks, self._chunks = self._chunks, []
            ended = self.exit_code is not None
        if chunks:
            parts = (self._partial + b"".join(chunks)).split(b"\n")
            self._partial = parts.pop()
            self._lines.extend(parts)
        if ended and self._partial and not self._chunks:
            self._lines.append(self._partial)
            self._partial = b""

    def lines(self) -> Iterator[bytes]:
        """Complete lines, oldest first; the caller may stop early (the rest stay queued)."""
        self._take()
        while self._lines:
            line = self._lines.popleft()
            with self._room:
                self._pending -= len(line) + 1
                self._room.notify()
            yield line

    def has_lines(self) -> bool:
        with self._lock:
            return bool(self._lines or self._chunks)
