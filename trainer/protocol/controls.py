"""Commands from outside the loop: stdin JSON lines (a daemon thread) and SIGTERM, merged in one queue.

The loop calls :meth:`Controls.poll` after every step: an empty-queue check, no lock held, no sync.
The reader thread survives any line (see :func:`trainer.protocol.events.parse_command`): a refused line is
reported on stderr and the next one is read.
"""

from __future__ import annotations

import queue
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import IO, Any

from .commands import (
    MAX_COMMAND_CHARS,
    PAUSE,
    RESUME,
    STOP,
    Command,
    CommandError,
    InspectNow,
    Pause,
    RecordMemory,
    Resume,
    SetLr,
    Stop,
    WriteCheckpoints,
    parse_command,
)


class Controls:
    """Pause/resume/stop/set_lr state for the loop. ``on_state`` reports paused/running/stopping."""

    def __init__(self, on_state: Callable[[str, str], None]) -> None:
        self.commands: queue.Queue[Command] = queue.Queue()
        self.on_state = on_state
        self.stop_requested = False
        self.stop_reason = ""
        self.lr_override: float | None = None
        self.on_inspect: Callable[[], None] = lambda: None   # the live inspection's request (trainer.inspection)
        self.on_record_memory: Callable[[], None] = lambda: None   # trainer.memory.timeline.LiveRecording.request
        self.on_set_lr: Callable[[float], None] = lambda lr: None   # records a rate set by hand with the run
        self.on_write_checkpoints: Callable[[], None] = lambda: None   # trainer.checkpoints.saving.write_held
        self.sigterm = False
        self.paused_seconds = 0.0   # time spent paused so far: epoch times and the ETA leave it out

    def listen(self, stream: IO[Any] | None = None) -> threading.Thread:
        """Read commands from ``stream`` (stdin) on a daemon thread. At EOF (the studio went away, or
        was told to let the run finish) a paused run resumes: nothing could resume it any more."""
        source = stream if stream is not None else sys.stdin

        def reader() -> None:
            for line in command_lines(source):
                try:
                    self.commands.put(parse_command(line))
                except CommandError as exc:
                    print(f"trainer: ignoring command: {exc}", file=sys.stderr, flush=True)
                except Exception as exc:  # noqa: BLE001 - no line may end the command channel
                    print(f"trainer: ignoring command ({type(exc).__name__})", file=sys.stderr, flush=True)
            self.commands.put(StdinClosed())

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
            self._stop("SIGTERM")
        while not self.commands.empty():
            self._apply(self.commands.get_nowait())
        return self.stop_requested

    def _stop(self, reason: str) -> None:
        self.stop_requested, self.stop_reason = True, reason
        self.on_state("stopping", reason)

    def _apply(self, cmd: Command) -> None:
        if isinstance(cmd, Stop):
            self._stop(STOP)
        elif isinstance(cmd, SetLr):
            self.lr_override = cmd.lr
            self.on_set_lr(cmd.lr)
        elif isinstance(cmd, InspectNow):
            self.on_inspect()
        elif isinstance(cmd, RecordMemory):
            self.on_record_memory()
        elif isinstance(cmd, WriteCheckpoints):
            self.on_write_checkpoints()
        elif isinstance(cmd, Pause):
            self._paused()

    def _paused(self) -> None:
        start = time.perf_counter()   # before on_state: the pause began when it was applied
        self.on_state("paused", PAUSE)
        try:
            self._wait_for_resume()
        finally:
            self.paused_seconds += time.perf_counter() - start

    def _wait_for_resume(self) -> None:
        while True:
            if self.sigterm:
                self._stop("SIGTERM")
                return
            try:
                cmd = self.commands.get(timeout=0.2)
            except queue.Empty:
                continue
            if isinstance(cmd, Resume):
                self.on_state("running", STDIN_CLOSED if isinstance(cmd, StdinClosed) else RESUME)
                return
            if not isinstance(cmd, Pause):
                self._apply(cmd)
            if self.stop_requested:
                return


STDIN_CLOSED = "stdin closed"


class StdinClosed(Resume):
    """What the reader puts at EOF: resume a paused run (the reason its ``state`` event gives)."""


def command_lines(source: IO[Any]) -> Iterator[bytes | str]:
    """The lines of ``source``, as bytes when it has a binary buffer (so a line that is not UTF-8 is
    one refused line, not the end of the text stream), each cut at MAX_COMMAND_CHARS + 1 (a line
    without an end is read in pieces, never whole into memory). Ends at EOF or a read error."""
    stream = getattr(source, "buffer", source)
    while True:
        try:
            line = stream.readline(MAX_COMMAND_CHARS + 1)
        except (OSError, ValueError):
            return
        if not line:
            return
        if len(line) > MAX_COMMAND_CHARS:
            while line and not line.endswith(b"\n" if isinstance(line, bytes) else "\n"):
                try:
                    line = stream.readline(MAX_COMMAND_CHARS + 1)     # skip the rest of the long line
                except (OSError, ValueError):
                    return
            yield b"x" * (MAX_COMMAND_CHARS + 1)   # reported once, as too long
            continue
        if line.strip():
            yield line
