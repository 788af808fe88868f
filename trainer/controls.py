"""Commands from outside the loop: stdin JSON lines (a daemon thread) and SIGTERM, merged in one queue.

The loop calls :meth:`Controls.poll` after every step: an empty-queue check, no lock held, no sync.
"""

from __future__ import annotations

import queue
import signal
import sys
import threading
from collections.abc import Callable
from typing import IO, Any

from .events import PAUSE, RESUME, SET_LR, STOP, parse_command


class Controls:
    """Pause/resume/stop/set_lr state for the loop. ``on_state`` reports paused/running/stopping."""

    def __init__(self, on_state: Callable[[str, str], None]) -> None:
        self.commands: queue.Queue[dict[str, Any]] = queue.Queue()
        self.on_state = on_state
        self.stop_requested = False
        self.stop_reason = ""
        self.lr_override: float | None = None
        self.sigterm = False

    def listen(self, stream: IO[str] | None = None) -> threading.Thread:
        """Read commands from ``stream`` (stdin) on a daemon thread; EOF just ends the thread."""
        source = stream if stream is not None else sys.stdin

        def reader() -> None:
            try:
                for line in source:
                    if not line.strip():
                        continue
                    try:
                        self.commands.put(parse_command(line))
                    except ValueError as exc:
                        print(f"trainer: ignoring command: {exc}", file=sys.stderr, flush=True)
            except (OSError, ValueError):
                return

        thread = threading.Thread(target=reader, name="trainer-commands", daemon=True)
        thread.start()
        return thread

    def install_sigterm(self) -> None:
        """SIGTERM (and Ctrl-C's SIGINT) mean stop: checkpoint and end cleanly at the next step."""
        def handler(_signum: int, _frame: object) -> None:
            # Only a flag: the handler runs on the main thread, possibly inside a queue call.
            self.sigterm = True

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)

    def poll(self, _step: int = 0) -> bool:
        """Apply pending commands; blocks while paused. True when the run must stop now."""
        if self.sigterm and not self.stop_requested:
            self._apply({"command": STOP, "reason": "SIGTERM"})
        while not self.commands.empty():
            self._apply(self.commands.get_nowait())
        return self.stop_requested

    def _apply(self, cmd: dict[str, Any]) -> None:
        name = cmd["command"]
        if name == STOP:
            self.stop_requested, self.stop_reason = True, cmd.get("reason", STOP)
            self.on_state("stopping", self.stop_reason)
        elif name == SET_LR:
            self.lr_override = float(cmd["lr"])
        elif name == PAUSE:
            self._paused()

    def _paused(self) -> None:
        self.on_state("paused", PAUSE)
        while True:
            if self.sigterm:
                self._apply({"command": STOP, "reason": "SIGTERM"})
                return
            try:
                cmd = self.commands.get(timeout=0.2)
            except queue.Empty:
                continue
            if cmd["command"] == RESUME:
                self.on_state("running", RESUME)
                return
            if cmd["command"] != PAUSE:
                self._apply(cmd)
            if self.stop_requested:
                return
