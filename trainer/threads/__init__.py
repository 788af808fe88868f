"""How the worker computes on the CPU: one thread per core it may really use, fewer while other
processes use them.

PyTorch's CPU kernels run on an OpenMP pool of one thread per core. By default a pool thread that
finishes its share of a parallel region spins (~3 ms), waiting for the next one: on free cores that
is the fastest there is; on cores other processes want, the spinning threads take the cores from the
threads with work, theirs and ours, and a run collapses (digits_cnn's 10 epochs: 1.4 s quiet, 16-21 s
beside two CPU hogs, 396 s at a load average of 16-19). So the worker, before torch is imported
(OpenMP reads its environment once), chooses one of these (``TORCH_STUDIO_THREADS``):

- ``adaptive`` (the default): PyTorch's own waiting, and the thread count re-decided from the other
  processes' CPU use while it trains (:mod:`trainer.threads.adaptive`): the full team on free cores,
  down to a single thread (no team, nothing to wait for) while they are busy;
- ``passive``: ``OMP_WAIT_POLICY=PASSIVE`` and every usable core: a thread without work sleeps at once,
  so the run slows in proportion to the load, at a cost of ~30% on an idle machine (a sleep and a
  wake-up at every parallel region; 0.70x a plain PyTorch script on digits_cnn);
- ``default``: PyTorch's own threading (the benchmark's baseline);
- ``N``: N threads, waiting passively.

A compiled run (``precision.compile``) waits passively with every usable core, whatever the switch
but ``default`` or N: Inductor's C++ kernels are generated for the thread count at compile time (and
its compile cache is keyed by it), so the count must not change under them.

"Usable cores" are the affinity mask (``sched_getaffinity``: taskset, cpusets) capped by a container's
CPU quota (cgroup ``cpu.max``, or v1's ``cfs_quota_us``), which PyTorch's default ignores (64 threads
for a 2-CPU quota on a 64-core host); ``OMP_NUM_THREADS`` and ``MKL_NUM_THREADS`` are set to them.

A short spin before sleeping (``GOMP_SPINCOUNT=100000``, which issue 26 measured for a plain loop at
1.50 s quiet against passive's 2.47 and 5.1 s beside two hogs) is not used with a fixed team: at a load
average of 16-19 (other sessions' tests and runs), digits_cnn's 10 epochs took 636 s in the worker with
that spin and 15.5 s waiting passively. A partner thread descheduled behind many runnable processes
makes every spin run to its end, at every parallel region. ``GOMP_SPINCOUNT`` set by the user is
passed on as it is.

A user's own ``OMP_NUM_THREADS`` (then waiting passively) or ``OMP_WAIT_POLICY`` is kept.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import MutableMapping
from dataclasses import dataclass
from pathlib import Path

from . import adaptive

SWITCH = "TORCH_STUDIO_THREADS"
ADAPTIVE = "adaptive"
MODES = (ADAPTIVE, "passive", "default")
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
CGROUP = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class ThreadPlan:
    """What :func:`configure` decided: the thread count (None: as set, or PyTorch's), the wait policy
    (None: as set, or PyTorch's), whether the count follows the load (:mod:`trainer.threads.adaptive`),
    and why."""

    threads: int | None
    wait_policy: str | None
    reason: str
    adaptive: bool = False


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


def plan(env: MutableMapping[str, str], cores: int, *, compiled: bool = False) -> ThreadPlan:
    """Decide the threading from the environment and the usable cores (pure, testable). A ``compiled``
    run waits passively with every core instead of adapting: Inductor's C++ kernels keep the thread
    count they were compiled with (and its compile cache is keyed by it)."""
    switch = env.get(SWITCH, "").strip().lower()
    if switch == "default":
        return ThreadPlan(None, None, f"{SWITCH}=default: PyTorch's own threading")
    passive = None if env.get("OMP_WAIT_POLICY") else "PASSIVE"
    if any(env.get(v) for v in THREAD_VARIABLES):
        given = next(env[v] for v in THREAD_VARIABLES if env.get(v))
        return ThreadPlan(None, passive, f"the environment's thread count ({given})")
    if switch == "passive":
        return ThreadPlan(cores, passive, f"{SWITCH}=passive: {cores} thread(s), waiting passively")
    fixed = int(switch) if switch.isdigit() else 0
    if fixed >= 1:
        return ThreadPlan(fixed, passive, f"{SWITCH}={fixed}")
    if switch not in ("", ADAPTIVE):
        print(f"warning: {SWITCH}={env[SWITCH]!r} is none of {', '.join(MODES)} or a thread count; "
              f"{ADAPTIVE} used", file=sys.stderr)
    if compiled:
        return ThreadPlan(cores, passive, f"a compiled run: {cores} thread(s), waiting passively")
    return ThreadPlan(cores, None, f"up to {cores} usable core(s), fewer while other processes use them",
                      adaptive=cores > 1)


def compiles(argv: list[str]) -> bool:
    """Whether the worker command ``argv`` (``run SPEC ...``) runs a spec that compiles; False when it
    cannot tell (the spec is read again, and checked, by the worker)."""
    if len(argv) < 2 or argv[0] != "run":
        return False
    try:
        spec = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
        return str(spec.get("precision", {}).get("compile", "off")) != "off"
    except (OSError, ValueError, AttributeError):
        return False


def configure(env: MutableMapping[str, str] | None = None, *, compiled: bool = False) -> ThreadPlan:
    """Decide and apply the worker's threading to ``env`` (``os.environ``): call before importing torch."""
    env = os.environ if env is None else env
    chosen = plan(env, usable_cores(), compiled=compiled)
    if chosen.wait_policy:
        env["OMP_WAIT_POLICY"] = chosen.wait_policy
    if chosen.threads is not None:
        for variable in THREAD_VARIABLES:
            env[variable] = str(chosen.threads)
    if chosen.adaptive and env is os.environ:   # this process's own threads: sampled from its start
        adaptive.start(chosen.threads or 1)
    return chosen
