"""How the worker computes on the CPU: bounded OpenMP spinning, one thread per core it may really use.

PyTorch's CPU kernels run on an OpenMP pool of one thread per core. A pool thread that finishes its
share of a parallel region waits for the next one, and how it waits decides two speeds:

- spinning without bound (GNU OpenMP's default spins ~300,000 times before it sleeps) is fastest on a
  quiet machine, but beside busy processes the spinning threads take the cores from the threads with
  work, theirs and ours: digits_cnn under two CPU hogs on 2 cores took 16-21 s where it takes 1.4 s
  quiet;
- sleeping at once (``OMP_WAIT_POLICY=PASSIVE``) slows in proportion to the load (6.5 s under the two
  hogs) but pays a wake-up at every parallel region: 1.6x slower than PyTorch's default when quiet;
- a short spin, then sleep (``GOMP_SPINCOUNT=100000``): a plain loop took 1.50 s quiet (default 1.39,
  passive 2.47) and 5.1 s under the two hogs (default 18-21) -- the consecutive kernels of a step
  follow each other within the spin, a descheduled partner costs at most the spin.

So the worker, before torch is imported (OpenMP reads its environment once):

- with GNU OpenMP (torch's Linux wheels bundle ``libgomp``) sets ``GOMP_SPINCOUNT`` to
  :data:`SPIN_COUNT`; with another OpenMP runtime, whose spinning this does not bound, passive waiting;
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
PyTorch's default 150 s. ``benchmarks/train_throughput.py`` measures the choice against a user's own
script with PyTorch's defaults, quiet and loaded.

A user's own ``OMP_NUM_THREADS``, ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT`` is kept.
``TORCH_STUDIO_THREADS=default`` leaves PyTorch's defaults (the benchmark's baseline);
``TORCH_STUDIO_THREADS=N`` fixes N threads.
"""

from __future__ import annotations

import importlib.util
import math
import os
import sys
from collections.abc import MutableMapping
from dataclasses import dataclass
from pathlib import Path

SWITCH = "TORCH_STUDIO_THREADS"
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
WAIT_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
SPIN_COUNT = 100_000   # GNU OpenMP's busy-wait iterations before a pool thread sleeps (its default: 300,000)
CGROUP = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class ThreadPlan:
    """What :func:`configure` decided: the thread count (None: as set, or PyTorch's), the wait policy
    and GNU OpenMP's spin count (None: as set, or the runtime's), and why."""

    threads: int | None
    wait_policy: str | None = None
    reason: str = ""
    spin_count: int | None = None


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


def gnu_openmp() -> bool:
    """Whether torch runs on GNU OpenMP (its Linux wheels bundle ``libgomp``), found without importing it."""
    found = importlib.util.find_spec("torch")
    folders = found.submodule_search_locations if found is not None else None
    return any(next((Path(f) / "lib").glob("libgomp*.so*"), None) is not None for f in folders or ())


def plan(env: MutableMapping[str, str], cores: int, gnu: bool = True) -> ThreadPlan:
    """Decide the threading from the environment, the usable cores and whether the OpenMP runtime is
    GNU's (pure, testable)."""
    switch = env.get(SWITCH, "").strip().lower()
    if switch == "default":
        return ThreadPlan(None, None, f"{SWITCH}=default: PyTorch's own threading")
    waiting: dict = {}
    if not any(env.get(v) for v in WAIT_VARIABLES):
        waiting = {"spin_count": SPIN_COUNT} if gnu else {"wait_policy": "PASSIVE"}
    if any(env.get(v) for v in THREAD_VARIABLES):
        given = next(env[v] for v in THREAD_VARIABLES if env.get(v))
        return ThreadPlan(None, reason=f"the environment's thread count ({given})", **waiting)
    if switch:
        fixed = int(switch) if switch.isdigit() else 0
        if fixed >= 1:
            return ThreadPlan(fixed, reason=f"{SWITCH}={fixed}", **waiting)
        print(f"warning: {SWITCH}={env[SWITCH]!r} is neither 'default' nor a thread count; ignored",
              file=sys.stderr)
    return ThreadPlan(cores, reason=f"{cores} usable core(s)", **waiting)


def configure(env: MutableMapping[str, str] | None = None) -> ThreadPlan:
    """Decide and apply the worker's threading to ``env`` (``os.environ``): call before importing torch."""
    env = os.environ if env is None else env
    chosen = plan(env, usable_cores(), gnu_openmp())
    if chosen.wait_policy:
        env["OMP_WAIT_POLICY"] = chosen.wait_policy
    if chosen.spin_count is not None:
        env["GOMP_SPINCOUNT"] = str(chosen.spin_count)
    if chosen.threads is not None:
        for variable in THREAD_VARIABLES:
            env[variable] = str(chosen.threads)
    return chosen
