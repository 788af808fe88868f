"""Is the process that runs a run still there? A pid plus, where the system says, its start time.

A pid alone is not enough: the system gives a dead process's pid to a new one, and a run whose
worker died would then read "running" for ever. On Linux ``/proc/PID/stat`` gives the start time
(clock ticks since boot), and a (pid, start) pair names one process. Elsewhere the pid alone is
checked with ``kill(pid, 0)``. Used by the run store to tell running runs from interrupted ones.
"""

from __future__ import annotations

import os
from pathlib import Path


def _proc_stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (Linux), or None where there is no /proc."""
    if not Path("/proc/self/stat").exists():
        return None
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def process_started(pid: int) -> int:
    """When process ``pid`` started, in clock ticks since boot (Linux), 0 where the system does not say.
    With the pid it names one process: a pid is reused, a (pid, start) pair is not."""
    return _start_ticks(_proc_stat(pid))


def _start_ticks(fields: list[str] | None) -> int:
    try:
        return int(fields[19]) if fields else 0      # field 22 of stat; the first two are before ")"
    except (IndexError, ValueError):
        return 0


def process_alive(pid: int, started: int = 0) -> bool:
    """True while ``pid`` is a live (not zombie) process, and, when ``started`` is known, the same
    process that started then (not another one the pid was given to since)."""
    if pid <= 0:
        return False
    fields = _proc_stat(pid)
    if fields is not None:
        if not fields or fields[0] in ("Z", "X"):
            return False
        return not started or _start_ticks(fields) == started
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
