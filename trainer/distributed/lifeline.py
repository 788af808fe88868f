"""A torchrun rank lives only as long as the process that started it, and says that it lives.

A rank is a child of its launcher (our ``python -m trainer run`` launcher's elastic agent, or a user's
``torchrun``). Killed with SIGKILL, a launcher cannot pass anything on: its ranks went on training
alone, writing metrics and pruning checkpoints under a run that every reader showed interrupted (and
that a resume then took over). So each rank asks the kernel for SIGKILL when its parent dies
(Linux's ``PR_SET_PDEATHSIG``; elsewhere a thread watches the parent), before it imports torch.

Each rank also leaves ``ranks/rank-N.pid`` in the run's folder (pid, start time, host): a resume
refuses while any rank of the run is still alive on this machine (:func:`live_ranks`).

No torch here: :mod:`trainer.__main__` calls :func:`die_with_parent` on its first lines.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from ..store.liveness import process_alive, process_started

CHILD_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK")   # what torchrun sets in every rank it starts
PR_SET_PDEATHSIG = 1
RANKS_DIR = "ranks"                                # in the run dir: the ranks' pids, failures, logs


def is_torchrun_child(env: Mapping[str, str] = os.environ) -> bool:
    """Whether this process is a rank started by torchrun (its variables are all set)."""
    return all(k in env for k in CHILD_ENV)


def die_with_parent(parent: int | None = None) -> None:
    """SIGKILL this process when ``parent`` (default: the current parent) dies; at once if it is gone."""
    parent = os.getppid() if parent is None else parent
    if not _pdeathsig():
        threading.Thread(target=_watch, args=(parent,), name="parent-watch", daemon=True).start()
    if os.getppid() != parent:      # it died before the kernel was asked: nobody would send the signal
        os.kill(os.getpid(), signal.SIGKILL)


def _pdeathsig() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.5)
    os.kill(os.getpid(), signal.SIGKILL)


GLOO_THREADS = ("pt_gloo_runloop", "gloo_tcp_loop")   # a gloo group's workers, its TCP transport's loop


def gloo_threads_alive() -> bool:
    """Whether a thread of a gloo process group still runs in this process (Linux names them in /proc);
    True where that cannot be told."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return True
    for task in tasks:
        try:
            if Path(f"/proc/self/task/{task}/comm").read_text().strip() in GLOO_THREADS:
                return True
        except OSError:      # ended while listed
            continue
    return False


def pid_file(run_dir: Path, rank: int) -> Path:
    return run_dir / RANKS_DIR / f"rank-{rank}.pid"


def note_alive(run_dir: Path, rank: int) -> None:
    """Record this rank's process (pid, start time, host) in the run's folder."""
    path = pid_file(run_dir, rank)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"rank": rank, "pid": os.getpid(), "started": process_started(os.getpid()), "host": socket.gethostname()}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record), encoding="utf-8")
    os.replace(tmp, path)


def live_ranks(run_dir: Path | str | None) -> list[tuple[int, int]]:
    """(rank, pid) of each rank of the run in ``run_dir`` still alive on this machine."""
    folder = Path(run_dir) / RANKS_DIR if run_dir else None
    if folder is None or not folder.is_dir():
        return []
    host, out = socket.gethostname(), []
    for path in sorted(folder.glob("rank-*.pid")):
        try:
            r = json.loads(path.read_text(encoding="utf-8"))
            if r["host"] == host and process_alive(int(r["pid"]), int(r["started"])):
                out.append((int(r["rank"]), int(r["pid"])))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return out
