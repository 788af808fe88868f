"""A small, Qt-free client for the worker: start it as a child process, read its events, send commands.

    with WorkerClient.run("spec.json", db="sqlite:///runs.sqlite") as w:
        for event in w.events(timeout=60):
            if event["event"] == "metrics":
                print(event["step"], event["loss"])
            if event["event"] == "epoch_end" and event["epoch"] == 3:
                w.stop()
        status = w.wait()

Events are the dicts of :mod:`trainer.events`, parsed. Threads read stdout and stderr so the child
never blocks on a full pipe; a GUI adapts this by draining :attr:`queue` from a timer instead of
iterating :meth:`events`.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .events import PAUSE, RESUME, SET_LR, STOP, encode_command


class WorkerClient:
    """One worker process. ``queue`` receives parsed event dicts, then a final ``None`` at EOF."""

    def __init__(self, args: list[str], *, env: dict[str, str] | None = None, cwd: str | None = None) -> None:
        self.args = [sys.executable, "-m", "trainer", *args]
        self.proc = subprocess.Popen(self.args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, bufsize=1, env=env, cwd=cwd)
        self.queue: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.stderr_lines: list[str] = []
        self.bad_lines: list[str] = []
        threading.Thread(target=self._read_stdout, daemon=True, name="worker-stdout").start()
        threading.Thread(target=self._read_stderr, daemon=True, name="worker-stderr").start()

    @classmethod
    def run(cls, spec: str | Path, *, db: str | None = None, run_dir: str | Path | None = None,
            **kwargs: Any) -> WorkerClient:
        """Start ``python -m trainer run SPEC``."""
        args = ["run", str(spec)] + (["--db", db] if db else []) + (["--run-dir", str(run_dir)] if run_dir else [])
        return cls(args, **kwargs)

    @classmethod
    def resume(cls, run_id: int, *, db: str | None = None, **kwargs: Any) -> WorkerClient:
        """Start ``python -m trainer resume RUN_ID``."""
        return cls(["resume", str(run_id)] + (["--db", db] if db else []), **kwargs)

    # ------------------------------------------------------------ reading
    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                self.bad_lines.append(line)  # a stray print in user code; not an event
                continue
            if isinstance(obj, dict) and "event" in obj:
                self.queue.put(obj)
        self.queue.put(None)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr_lines.append(line)

    def events(self, timeout: float | None = None) -> Iterator[dict[str, Any]]:
        """Yield events until the worker closes stdout; TimeoutError when none comes for ``timeout`` s."""
        while True:
            try:
                item = self.queue.get(timeout=timeout)
            except queue.Empty:
                raise TimeoutError(f"no event from the worker for {timeout} s") from None
            if item is None:
                return
            yield item

    @property
    def stderr(self) -> str:
        return "".join(self.stderr_lines)

    # ------------------------------------------------------------ commands
    def send(self, command: str, **fields: Any) -> bool:
        """Write one command line; False when the worker no longer reads its stdin."""
        if self.proc.stdin is None or self.proc.poll() is not None:
            return False
        try:
            self.proc.stdin.write(encode_command(command, **fields) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            return False
        return True

    def pause(self) -> bool:
        return self.send(PAUSE)

    def resume_training(self) -> bool:
        return self.send(RESUME)

    def stop(self) -> bool:
        """Ask for a checkpoint and a clean end (``finished`` with status "stopped")."""
        return self.send(STOP)

    def set_lr(self, lr: float) -> bool:
        return self.send(SET_LR, lr=lr)

    def terminate(self) -> None:
        """SIGTERM: the worker treats it as stop."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()

    def wait(self, timeout: float | None = None) -> int:
        return self.proc.wait(timeout)

    def close(self) -> None:
        """Close our end of stdin, wait briefly, kill if the worker is still there."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30 if self.proc.poll() is None else None)
        except subprocess.TimeoutExpired:
            self.kill()
            self.proc.wait()

    def __enter__(self) -> WorkerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is not None:
            self.kill()
        self.close()


def environ_with(**values: str) -> dict[str, str]:
    """The current environment plus ``values`` (e.g. ``TORCH_STUDIO_DB``), for ``env=``."""
    return {**os.environ, **values}
