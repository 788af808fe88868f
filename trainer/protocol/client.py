"""The one client of the worker process, Qt-free: start it, read its typed events, send it commands.

    with WorkerClient.run("spec.json", db="sqlite:///runs.sqlite") as w:
        for event in w.events(timeout=60):
            if isinstance(event, Metrics):
                print(event.step, event.loss)
            if isinstance(event, EpochEnd) and event.epoch == 3:
                w.stop()
        status = w.wait()

The CLI iterates :meth:`WorkerClient.events`; the studio's bridge calls :meth:`WorkerClient.poll`
from a timer, which parses at most a time budget's worth of lines per call. Either way:

- A reader thread blocks on the worker's stdout and moves raw bytes into a buffer; it does no
  parsing (its time is spent in ``os.read``, GIL released, so it never competes with a GUI thread).
  The lines are parsed into :mod:`trainer.protocol.events` dataclasses by whoever reads them.
- Back-pressure: the reader stops reading while ``MAX_PENDING_BYTES`` wait unread, so a reader
  that falls behind slows the worker (its writes block on a full pipe), and memory stays bounded.
- stderr goes to a log file (``log_path``) or, without one, into a bounded in-memory tail; its last
  lines are the reason given when the process dies without a ``finished`` or ``failed`` event
  (:meth:`WorkerClient.crash_reason`).
- ``own_session`` starts the worker in a session of its own, so it can outlive its parent (the
  studio's "let it finish in the background": :meth:`WorkerClient.detach`); ``nice`` lowers its
  priority so a GUI beside it stays responsive.
- ``die_with_parent`` (Linux) is the opposite: the kernel sends the worker SIGTERM (its clean stop)
  when this process dies, even by SIGKILL, so a killed sweep leaves no worker training behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from .commands import Command, Pause, Resume, SetLr, Stop
from .events import ENDS, Event, ProtocolError, RunStarted

CHUNK = 1 << 16                 # bytes per read of the worker's stdout
MAX_PENDING_BYTES = 4 << 20     # read no further ahead of the consumer than this
STDERR_TAIL_BYTES = 256 << 10   # stderr kept in memory when there is no log file
LOG_TAIL_LINES = 12             # stderr lines quoted in a crash reason


def worker_command(*args: str) -> list[str]:
    """``python -m trainer ARGS``: the command a user can type in a terminal, too."""
    return [sys.executable, "-m", "trainer", *args]


class WorkerClient:
    """One worker process, from its start to its exit code."""

    def __init__(self, args: list[str], *, command: list[str] | None = None,
                 log_path: str | os.PathLike[str] | None = None, env: dict[str, str] | None = None,
                 cwd: str | os.PathLike[str] | None = None, own_session: bool = False, nice: int = 0,
                 die_with_parent: bool = False,
                 start_thread: Callable[[threading.Thread], None] = threading.Thread.start) -> None:
        """Start ``python -m trainer ARGS`` (``command`` replaces the whole command line: benchmarks,
        tests). stderr goes to ``log_path`` (appended) when given, else to a bounded memory tail.
        ``start_thread`` starts the reader threads: a GUI passes one that keeps Python's garbage
        collector off them while they run (it would destroy the GUI's garbage Qt objects there)."""
        self.args = command or worker_command(*args)
        if die_with_parent and sys.platform.startswith("linux"):
            self.args = [sys.executable, "-c", _DIE_WITH_PARENT, str(os.getpid()), *self.args]
        self.log_path = Path(log_path) if log_path is not None else None
        self.run_id: int | None = None
        self.ended = False            # a finished or failed event was read
        self.bad_lines = 0            # stdout lines that were not events (a stray print in user code)
        self._detached = False
        self._stderr: _Tail | None = None
        environ = dict(os.environ if env is None else env, PYTHONUNBUFFERED="1")
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.log_path, "ab") as log:
                self.proc = self._popen(log, environ, cwd, own_session)
        else:
            self.proc = self._popen(subprocess.PIPE, environ, cwd, own_session)
            self._stderr = _Tail(STDERR_TAIL_BYTES)
            start_thread(threading.Thread(target=self._stderr.read, args=(self.proc.stderr,),
                                          name="worker-stderr", daemon=True))
        if nice:
            lower_priority(self.proc.pid, nice)
        self._feed = _Feed()
        start_thread(threading.Thread(target=self._read, name="worker-stdout", daemon=True))

    def _popen(self, stderr: Any, env: dict[str, str], cwd: Any, own_session: bool) -> subprocess.Popen[bytes]:
        return subprocess.Popen(self.args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                                env=env, cwd=cwd, start_new_session=own_session)

    @classmethod
    def run(cls, spec: str | os.PathLike[str], *, db: str | None = None,
            run_dir: str | os.PathLike[str] | None = None, **kwargs: Any) -> WorkerClient:
        """Start ``python -m trainer run SPEC [--db URL] [--run-dir DIR]``."""
        args = ["run", str(spec)] + (["--db", db] if db else []) + (["--run-dir", str(run_dir)] if run_dir else [])
        return cls(args, **kwargs)

    @classmethod
    def resume(cls, run_id: int, *, db: str | None = None, **kwargs: Any) -> WorkerClient:
        """Start ``python -m trainer resume RUN_ID [--db URL]``."""
        return cls(["resume", str(run_id)] + (["--db", db] if db else []), **kwargs)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def is_running(self) -> bool:
        """The process is alive (it may have reported its end and be exiting)."""
        return self.proc.poll() is None

    # ------------------------------------------------------------ reading
    def _read(self) -> None:
        """Reader thread: raw chunks of stdout into the feed, no parsing; blocks while the feed is full."""
        fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
        while True:
            try:
                chunk = os.read(fd, CHUNK)
            except OSError:
                chunk = b""
            if not chunk or self._detached:
                break
            self._feed.put(chunk)
            self._feed.wait_below(MAX_PENDING_BYTES)
        if self._detached:
            # Nobody listens any more: close our end; the worker's next write fails quietly
            # and it trains on, writing to the run store only.
            with contextlib.suppress(OSError):
                self.proc.stdout.close()  # type: ignore[union-attr]
            return
        self._feed.close(self.proc.wait())

    def poll(self, budget_s: float | None = None) -> list[Event]:
        """The events that have arrived, parsed, without waiting; with ``budget_s``, stop parsing once
        that much time is spent (the rest stay queued for the next call)."""
        deadline = None if budget_s is None else time.perf_counter() + budget_s
        out: list[Event] = []
        for line in self._feed.lines():
            event = self._parse(line)
            if event is not None:
                out.append(event)
            if deadline is not None and time.perf_counter() > deadline:
                break
        return out

    def _parse(self, raw: bytes) -> Event | None:
        if self._detached or not raw.strip():
            return None
        try:
            event = Event.from_json(raw)
        except ProtocolError:
            self.bad_lines += 1
            return None
        if isinstance(event, RunStarted) or (self.run_id is None and event.run_id is not None):
            self.run_id = event.run_id
        if isinstance(event, ENDS):
            self.ended = True
        return event

    @property
    def pending_bytes(self) -> int:
        """Bytes the worker wrote that no reader has taken yet (bounded: the reader slows the worker)."""
        return self._feed.pending

    @property
    def exit_code(self) -> int | None:
        """The exit status once the process has exited and every line it wrote has been read, else None."""
        return self._feed.exit_code if self._feed.drained() else None

    def events(self, timeout: float | None = None) -> Iterator[Event]:
        """Yield events until the worker exits; TimeoutError when none comes for ``timeout`` s."""
        while True:
            batch = self.poll()
            yield from batch
            if batch:
                continue
            if self._feed.drained() or self._detached:
                return
            if not self._feed.wait_for_data(timeout):
                raise TimeoutError(f"no event from the worker for {timeout} s")

    @property
    def stderr(self) -> str:
        """What the worker wrote on stderr (the log file's text, or the in-memory tail)."""
        if self._stderr is not None:
            return self._stderr.text()
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace") if self.log_path else ""
        except OSError:
            return ""

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last ``lines`` non-empty lines of stderr."""
        return "\n".join([ln for ln in self.stderr.splitlines() if ln.strip()][-lines:])

    def crash_reason(self, code: int) -> str:
        """Why a worker that reported no end stopped: its exit status or signal, and its last stderr."""
        if code < 0:
            try:
                what = f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                what = f"was killed by signal {-code}"
        else:
            what = f"exited with status {code} without reporting an end"
        tail = self.log_tail()
        return f"the worker process {what}" + (f"\n{tail}" if tail else "")

    # ------------------------------------------------------------ commands
    def send(self, command: Command) -> bool:
        """Write one command line; False when the worker no longer reads its stdin."""
        stdin = self.proc.stdin
        if stdin is None or self._detached or self.proc.poll() is not None:
            return False
        try:
            stdin.write((command.to_json() + "\n").encode())
            stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            return False
        return True

    def pause(self) -> bool:
        return self.send(Pause())

    def resume_training(self) -> bool:
        return self.send(Resume())

    def stop(self) -> bool:
        """Ask for a checkpoint and a clean end (``finished`` with status "stopped")."""
        return self.send(Stop())

    def set_lr(self, lr: float) -> bool:
        """From the next step on, train at ``lr`` (a :class:`~trainer.protocol.events.CommandError` if it is not
        a positive finite number)."""
        return self.send(SetLr(lr=lr))

    # ------------------------------------------------------------ the process
    def terminate(self) -> None:
        """SIGTERM: the worker treats it as stop (checkpoint, then end)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()

    def wait(self, timeout: float | None = None) -> int:
        return self.proc.wait(timeout)

    def detach(self) -> None:
        """Let the worker run on without us: close our pipe ends, read nothing more. In its own
        session it survives our exit and keeps writing to the run store."""
        self._detached = True
        self._close_stdin()

    def close(self) -> None:
        """Close our end of stdin, wait briefly, kill if the worker is still there."""
        self._close_stdin()
        try:
            self.proc.wait(timeout=30 if self.proc.poll() is None else None)
        except subprocess.TimeoutExpired:
            self.kill()
            self.proc.wait()

    def _close_stdin(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()

    def __enter__(self) -> WorkerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is not None:
            self.kill()
        self.close()


# Set PR_SET_PDEATHSIG (1) to SIGTERM, then become the worker (execv keeps it). A parent already gone
# before the prctl (the child was re-parented) is caught by the getppid check. No preexec_fn: the
# caller has reader threads, and a fork with threads must not run Python before its exec.
_DIE_WITH_PARENT = ("import ctypes, os, signal, sys; ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM); "
                    "os.getppid() == int(sys.argv[1]) or sys.exit(143); os.execv(sys.argv[2], sys.argv[2:])")


def lower_priority(pid: int, nice: int) -> None:
    """Run the worker ``nice`` steps below us: on a machine whose cores the training saturates, a GUI
    still gets the CPU when it needs it (a paint, a click); an idle GUI costs the worker nothing.
    Threads the worker starts later inherit it."""
    if hasattr(os, "setpriority"):
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, pid, os.getpriority(os.PRIO_PROCESS, pid) + nice)


def environ_with(**values: str) -> dict[str, str]:
    """The current environment plus ``values`` (e.g. ``TORCH_STUDIO_DB``), for ``env=``."""
    return {**os.environ, **values}


class _Tail:
    """The last ``limit`` bytes of a stream's lines, read on a thread (stderr without a log file)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lines: deque[bytes] = deque()
        self._size = 0
        self._lock = threading.Lock()

    def read(self, stream: IO[bytes]) -> None:
        for line in stream:
            with self._lock:
                self._lines.append(line)
                self._size += len(line)
                while self._size > self.limit and len(self._lines) > 1:
                    self._size -= len(self._lines.popleft())

    def text(self) -> str:
        with self._lock:
            return b"".join(self._lines).decode("utf-8", errors="replace")


class _Feed:
    """Bytes read from the worker, split into lines by the consumer; shared with the reader thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)    # the reader waits here for the consumer
        self._data = threading.Condition(self._lock)    # the consumer waits here for the reader
        self._chunks: list[bytes] = []
        self._lines: deque[bytes] = deque()
        self._partial = b""
        self._pending = 0
        self.exit_code: int | None = None

    @property
    def pending(self) -> int:
        """Bytes read from the worker and not yet taken as lines."""
        return self._pending

    def put(self, chunk: bytes) -> None:
        with self._lock:
            self._chunks.append(chunk)
            self._pending += len(chunk)
            self._data.notify_all()

    def wait_below(self, limit: int) -> None:
        with self._room:
            self._room.wait_for(lambda: self._pending < limit, timeout=1.0)

    def close(self, code: int) -> None:
        with self._lock:
            self.exit_code = code
            self._data.notify_all()

    def wait_for_data(self, timeout: float | None) -> bool:
        """Block until a chunk or the exit arrives; False when ``timeout`` passed first."""
        with self._data:
            return self._data.wait_for(lambda: bool(self._chunks) or self.exit_code is not None, timeout)

    def _take(self) -> None:
        with self._lock:
            chunks, self._chunks = self._chunks, []
            ended = self.exit_code is not None
        if chunks:
            parts = (self._partial + b"".join(chunks)).split(b"\n")
            self._partial = parts.pop()
            self._lines.extend(parts)
        if ended and self._partial:
            self._lines.append(self._partial)    # a last line without a newline
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

    def drained(self) -> bool:
        """The process has exited and every line it wrote has been handed out."""
        with self._lock:
            return self.exit_code is not None and not (self._lines or self._chunks or self._partial)
