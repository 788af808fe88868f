"""How the worker computes on the CPU: passive OpenMP waiting, one thread per core it may really use.

PyTorch's CPU kernels run on an OpenMP pool of one thread per core. By default a pool thread that
finishes its share of a parallel region spins, waiting for the next one. On a machine where other
processes are busy (the studio beside the worker, a browser, another run), the spinning threads take
the cores from the threads with work, theirs and ours: on a 2-core machine with two other CPU-bound
processes, 4 epochs of digits_cnn took 8.0 s with the default waiting and 2.7 s passive (0.7 s
quiet). So the worker, before torch is imported (OpenMP reads its environment once):

- sets ``OMP_WAIT_POLICY=PASSIVE``: a thread without work sleeps at once, and the training slows in
  proportion to the load instead of collapsing;
- sets ``OMP_NUM_THREADS`` (and MKL's) to the cores it may really use: its affinity mask
  (``sched_getaffinity``: taskset, cpusets) and a container's CPU quota (cgroup ``cpu.max``, or v1's
  ``cfs_quota_us``), which PyTorch's default ignores (64 threads for a 2-CPU quota on a 64-core host).

A short spin before sleeping (``GOMP_SPINCOUNT=100000``, which issue 26 measured for a plain loop at
1.50 s quiet against passive's 2.47 and 5.1 s beside two hogs) was tried and is not used: on this
2-core machine at a load average of 16-19 (other sessions' tests and runs), digits_cnn's 10 epochs took
636 s in the worker with that spin, 396 s in a plain script with PyTorch's default spinning, and 15.5 s
in the worker waiting passively (``benchmarks/train_throughput.py``, one round, run back to back). A
partner thread descheduled behind many runnable processes makes every spin run to its end, at every
parallel region; only passive waiting stays proportional to the load.

It does not take fewer threads because other processes are busy. Measured with
``benchmarks/worker_threads.py`` on 2 cores with two busy processes (and other sessions' load):
passive with 2 threads trained 2 epochs in 3.0-5.5 s, passive with the 1 thread left "free"
10.3-13.8 s (the scheduler shares a core per runnable thread, so one thread gets half the share),
PyTorch's default 150 s.

A user's own ``OMP_NUM_THREADS`` or ``OMP_WAIT_POLICY`` is kept. ``TORCH_STUDIO_THREADS=default``
leaves PyTorch's defaults (the benchmark's baseline); ``TORCH_STUDIO_THREADS=N`` fixes N threads.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import MutableMapping
from dataclasses import dataclass
from pathlib import Path

SWITCH = "TORCH_STUDIO_THREADS"
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
CGROUP = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class ThreadPlan:
    """What :func:`configure` decided: the thread count (None: as set, or PyTorch's), the wait policy
    (None: as set, or PyTorch's), and why."""

    threads: int | None
    wait_policy: str | None
    reason: str


def usable_cores(cgroup: Path = CGROUP) -> int:
    """Cores this process may really use: its affinity mask, capped by its container's CPU quota."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    quota = cpu_quota(cgroup)
    return max(1, min(cores, math.ceil(quota)) if quota else cores)


def cpu_quota(cgroup: Path = CGROUP) -> float | None:
    """CPUs a cgroup quota allows (``cpu.max`` "200000 100000" is 2.0), or None without a quota."""
    try:
        text = (cgroup / "cpu.max").read_text().split()
        if len(text) == 2 and text[0] != "max":
            return int(text[0]) / int(text[1])
        if text:
            return None
    except (OSError, ValueError, ZeroDivisionError):
        pass
    try:  # cgroup v1
        quota = int((cgroup / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((cgroup / "cpu" / "cpu.cfs_period_us").read_text())
        return quota / period if quota > 0 and period > 0 else None
    except (OSError, ValueError):
        return None


def plan(env: MutableMapping[str, str], cores: int) -> ThreadPlan:
    """Decide the threading from the environment and the usable cores (pure, testable)."""
    switch = env.get(SWITCH, "").strip().lower()
    if switch == "default":
        return ThreadPlan(None, None, f"{SWITCH}=default: PyTorch's own threading")
    wait = None if env.get("OMP_WAIT_POLICY") else "PASSIVE"
    if any(env.get(v) for v in THREAD_VARIABLES):
        given = next(env[v] for v in THREAD_VARIABLES if env.get(v))
        return ThreadPlan(None, wait, f"the environment's thread count ({given})")
    if switch:
        fixed = int(switch) if switch.isdigit() else 0
        if fixed >= 1:
            return ThreadPlan(fixed, wait, f"{SWITCH}={fixed}")
        print(f"warning: {SWITCH}={env[SWITCH]!r} is neither 'default' nor a thread count; ignored",
              file=sys.stderr)
    return ThreadPlan(cores, wait, f"{cores} usable core(s)")


def configure(env: MutableMapping[str, str] | None = None) -> ThreadPlan:
    """Decide and apply the worker's threading to ``env`` (``os.environ``): call before importing torch."""
    env = os.environ if env is None else env
    chosen = plan(env, usable_cores())
    if chosen.wait_policy:
        env["OMP_WAIT_POLICY"] = chosen.wait_policy
    if chosen.threads is not None:
        for variable in THREAD_VARIABLES:
            env[variable] = str(chosen.threads)
    return chosen
