"""How the worker computes on the CPU: OpenMP waiting and intra-op threads from the cores free now.

PyTorch's CPU kernels run on an OpenMP pool of one thread per core. By default a pool thread that
finishes its share of a parallel region spins, waiting for the next one. On a machine where other
processes are busy (the studio beside the worker, a browser, another run), the spinning threads take
cores from the threads with work, theirs and ours: on a 2-core machine with two other CPU-bound
processes, 4 epochs of digits_cnn took 8.0 s with the default waiting, 2.7 s with passive waiting
(0.7 s with the machine quiet). So the worker, before torch is imported (OpenMP reads its
environment once):

- sets ``OMP_WAIT_POLICY=PASSIVE``: a thread without work sleeps at once;
- sets ``OMP_NUM_THREADS`` (and MKL's) to the cores it may run on (``sched_getaffinity``) less those
  other runnable tasks hold right now (the kernel's running count in ``/proc/loadavg``, the least
  of a few samples so a momentary burst does not count; the 1-minute load average elsewhere), and
  at least one. On a quiet machine that is every core, as PyTorch's default.

A user's own ``OMP_NUM_THREADS`` or ``OMP_WAIT_POLICY`` is kept. ``TORCH_STUDIO_THREADS=default``
leaves PyTorch's defaults (the benchmark's baseline); ``TORCH_STUDIO_THREADS=N`` fixes N threads.
``benchmarks/worker_threads.py`` measures both with competing load started by the benchmark.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass

SWITCH = "TORCH_STUDIO_THREADS"
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


@dataclass(frozen=True)
class ThreadPlan:
    """What :func:`configure` decided: the thread count (None: PyTorch's), the wait policy, and why."""

    threads: int | None
    wait_policy: str | None
    reason: str


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask: a container's or taskset's limit counts)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def busy_elsewhere(samples: int = 5, interval_s: float = 0.01,
                   read: Callable[[], str] | None = None) -> float:
    """Runnable tasks other than this one, now: the least of ``samples`` readings of the kernel's
    running count (``/proc/loadavg``, 4th field ``running/total``), so only load that persists
    counts; where there is no ``/proc``, the 1-minute load average."""
    read = read or _read_loadavg
    counts = []
    for i in range(samples):
        try:
            running = int(read().split()[3].split("/")[0])
        except (OSError, ValueError, IndexError):
            break
        counts.append(running - 1)              # this process, reading, is one of them
        if i + 1 < samples:
            time.sleep(interval_s)
    if counts:
        return float(max(0, min(counts)))
    try:
        return max(0.0, os.getloadavg()[0] - 1.0)
    except OSError:
        return 0.0


def _read_loadavg() -> str:
    with open("/proc/loadavg", encoding="ascii") as f:
        return f.read()


def plan(env: MutableMapping[str, str], cores: int, busy: Callable[[], float]) -> ThreadPlan:
    """Decide the threading from the environment, the usable cores and the load (pure, testable)."""
    switch = env.get(SWITCH, "").strip().lower()
    if switch == "default":
        return ThreadPlan(None, None, f"{SWITCH}=default: PyTorch's own threading")
    wait = None if env.get("OMP_WAIT_POLICY") else "PASSIVE"
    if any(env.get(v) for v in THREAD_VARIABLES):
        given = next(env[v] for v in THREAD_VARIABLES if env.get(v))
        return ThreadPlan(None, wait, f"the environment's thread count ({given})")
    if switch:
        try:
            fixed = int(switch)
        except ValueError:
            fixed = 0
        if fixed >= 1:
            return ThreadPlan(fixed, wait, f"{SWITCH}={fixed}")
        print(f"warning: {SWITCH}={env[SWITCH]!r} is neither 'default' nor a thread count; ignored",
              file=sys.stderr)
    others = busy()
    threads = max(1, min(cores, round(cores - others)))
    return ThreadPlan(threads, wait, f"{cores} usable core(s), {others:g} busy with other work")


def configure(env: MutableMapping[str, str] | None = None) -> ThreadPlan:
    """Decide and apply the worker's threading to ``env`` (``os.environ``): call before importing torch."""
    env = os.environ if env is None else env
    chosen = plan(env, usable_cores(), busy_elsewhere)
    if chosen.wait_policy:
        env["OMP_WAIT_POLICY"] = chosen.wait_policy
    if chosen.threads is not None:
        for variable in THREAD_VARIABLES:
            env[variable] = str(chosen.threads)
    return chosen
