"""Threads that follow the machine's load: PyTorch's own team while the cores are free, fewer threads
(one, on two cores) while other processes use them.

OpenMP reads its wait policy once, at start; the thread count it can change at any parallel region
(``torch.set_num_threads``). With PyTorch's default waiting a pool thread spins ~3 ms after each
parallel region for the next: on free cores that is what makes it fast (passive waiting, a sleep and
a wake-up at every region, cost digits_cnn ~30% on the quiet 2-core machine), and beside busy
processes it is what collapses (each region waits for a partner thread the scheduler has put behind
them: 16-21 s against 1.4 s quiet under two CPU hogs). A single thread runs every kernel inline: no
team, no spinning, no waiting.

So the worker keeps the default wait policy and re-decides its thread count from what the *other*
processes used of the cores it may run on: ``/proc/stat`` (the CPUs of its affinity mask) less its own
time (``/proc/self/stat``), between two samples. The first sample is taken when the process starts
(:func:`trainer.threads.configure`, before torch is imported), so the first decision, at the first
step, covers the seconds of the worker's start: load that began before the run is seen at once.
Then a sample is due every ``every_s`` of steps (a clock read per step, two small files per sample),
so load that starts mid-run is answered within about a second. With hysteresis: a team of ``n``
threads drops when the others use more than 0.6 of a core of what it needs, and grows back only
when they leave a core and 0.6 of it free (the studio's own dashboard, beside its run, uses 0.1-0.3
of a core: that is no reason to give up a core; a busy process measures 0.7-1.0 beside a team that
spins, and 1.0 beside one thread).

While it computes on a single thread beside busy processes, the training thread also asks the
scheduler for longer turns (:func:`set_turn`: ``sched_setattr``'s ``sched_runtime``, a fair task's
slice since Linux 6.12; 1.4 ms by default on this 2-core machine, 10 ms asked). Its share stays what it
was (beside two CPU hogs each still took 2.0x its CPU), but it is switched out for them less often, and
each switch costs the step its caches: beside two hogs LeNet-5's step took a median 8.8 ms of CPU with
10 ms turns against 9.6 ms with the default (6 paired rounds, 5 of them faster; 13.2 against 14.7 ms of
idle-equivalent time; ``benchmarks/fair_share.py``, at a load of 5 from other work). A task with a
shorter slice (the studio's GUI) still preempts it at once. Back to the team, the default turn.

Nothing here imports torch: the decision is pure (:func:`others_cores`, :func:`target_threads`),
tested with fake ``/proc`` text.
"""

from __future__ import annotations

import ctypes
import math
import os
import struct
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from ..callbacks import Callback

if TYPE_CHECKING:
    from ..callbacks import StepFn

DROP_MARGIN = 0.6    # the others may use this much of a core before a thread goes
GROW_MARGIN = 0.4    # ... and at most this much before a thread comes back
EVERY_S = 1.0
PROC = Path("/proc")
TURN_NS = 10_000_000   # the turn a lone training thread asks for beside busy processes (0: the default)
SCHED_ATTR = {"x86_64": (314, 315), "aarch64": (274, 275)}   # sched_setattr, sched_getattr (no glibc wrapper)
ATTR = struct.Struct("IIQiIQQQII")   # struct sched_attr v1: size, policy, flags, nice, priority, runtime, ...

Step = TypeVar("Step", bound=Callable[..., object])


@dataclass(frozen=True)
class CpuSample:
    """Cumulative CPU times in clock ticks: all processes' busy time and the total on the CPUs watched,
    and this process's own (every thread)."""

    busy: int
    total: int
    own: int
    cpus: int


def parse_sample(stat: str, self_stat: str, cpus: set[int] | None = None) -> CpuSample:
    """A sample from the text of ``/proc/stat`` and ``/proc/self/stat``, over ``cpus`` (None: all)."""
    busy = total = count = 0
    for line in stat.splitlines():
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or name == "cpu" or not name[3:].isdigit():
            continue
        if cpus is not None and int(name[3:]) not in cpus:
            continue
        ticks = [int(v) for v in rest.split()[:8]]        # user nice system idle iowait irq softirq steal
        total += sum(ticks)
        busy += sum(ticks) - ticks[3] - (ticks[4] if len(ticks) > 4 else 0)
        count += 1
    # the command name (field 2) may hold spaces and parentheses: the fields after its last ")"
    fields = self_stat[self_stat.rindex(")") + 2:].split()
    own = int(fields[11]) + int(fields[12])                # utime, stime (fields 14 and 15)
    return CpuSample(busy, total, own, count)


def read_sample(proc: Path = PROC) -> CpuSample:
    """This moment's sample over the CPUs this process may run on."""
    try:
        cpus: set[int] | None = set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = None
    return parse_sample((proc / "stat").read_text(), (proc / "self" / "stat").read_text(), cpus)


def others_cores(before: CpuSample, after: CpuSample) -> float:
    """Cores' worth of CPU the other processes used between two samples (0 when no time passed)."""
    total = after.total - before.total
    if total <= 0 or after.cpus <= 0:
        return 0.0
    others = (after.busy - before.busy) - (after.own - before.own)
    return max(0.0, others) / total * after.cpus


def target_threads(others: float, cores: int, current: int) -> int:
    """The thread count for ``cores`` usable cores when the others use ``others`` cores, from ``current``:
    down when they use over ``DROP_MARGIN`` of a core more than a team of ``current`` leaves them,
    up only when they use at most ``GROW_MARGIN`` (hysteresis: no flapping at the edge)."""
    most = max(1, min(cores, cores - math.ceil(others - DROP_MARGIN)))
    least = max(1, min(cores, cores - math.ceil(others - GROW_MARGIN)))
    if current > most:
        return most
    if current < least:
        return least
    return current


def set_turn(ns: int) -> bool:
    """Ask the scheduler for turns of ``ns`` nanoseconds for the calling thread (0: the default slice),
    its policy and nice value kept; False where it cannot be asked (not Linux, a refusal, not a fair
    policy). Kernels before 6.12 take the call and keep their own slices."""
    numbers = SCHED_ATTR.get(os.uname().machine) if sys.platform == "linux" else None
    if numbers is None:
        return False
    try:
        syscall = ctypes.CDLL(None, use_errno=True).syscall
        attr = ctypes.create_string_buffer(ATTR.size)
        if syscall(numbers[1], 0, attr, ATTR.size, 0) != 0:
            return False
        fields = list(ATTR.unpack(attr.raw))
        if fields[1] not in (os.SCHED_OTHER, os.SCHED_BATCH):   # a real-time or idle thread: left alone
            return False
        fields[0], fields[5] = ATTR.size, ns         # the size we pass, and the runtime: a fair task's slice
        return int(syscall(numbers[0], 0, ctypes.create_string_buffer(ATTR.pack(*fields), ATTR.size), 0)) == 0
    except (OSError, AttributeError):
        return False


class AdaptiveThreads(Callback):
    """Re-decides the thread count every ``every_s`` and applies it on the training thread (the count
    OpenMP uses is the calling thread's own), with the scheduler turn for it (``turn``: :func:`set_turn`);
    as a loop callback, before each step."""

    def __init__(self, cores: int, *, start: CpuSample | None = None,
                 read: Callable[[], CpuSample] = read_sample, clock: Callable[[], float] = time.monotonic,
                 every_s: float = EVERY_S, turn: Callable[[int], object] = set_turn) -> None:
        self.cores, self.read, self.clock, self.every_s, self.turn = cores, read, clock, every_s, turn
        self.threads = cores
        self.last = start if start is not None else read()
        self.due = -math.inf if start is not None else clock() + every_s   # a start sample: decide at once
        self.others = 0.0

    def tick(self, set_threads: Callable[[int], None]) -> None:
        """Cheap unless a sample is due (a clock read); then sample, decide and apply."""
        now = self.clock()
        if now < self.due:
            return
        try:
            sample = self.read()
        except (OSError, ValueError, IndexError):   # /proc gone unreadable: keep the threads as they are
            self.due = math.inf
            return
        self.others = others_cores(self.last, sample)
        self.last, self.due = sample, now + self.every_s
        threads = target_threads(self.others, self.cores, self.threads)
        if threads != self.threads:
            self.threads = threads
            set_threads(threads)
            self.turn(TURN_NS if threads == 1 else 0)   # alone beside busy processes: longer turns

    def wrap(self, step: Step, set_threads: Callable[[int], None]) -> Step:
        """``step`` with a :meth:`tick` before each call; ``set_threads``: ``torch.set_num_threads``."""

        def ticked(*args: object, **kwargs: object) -> object:
            self.tick(set_threads)
            return step(*args, **kwargs)

        return ticked  # type: ignore[return-value]

    def wrap_step(self, step_fn: StepFn) -> StepFn:
        import torch

        return self.wrap(step_fn, torch.set_num_threads)


_PROCESS: list[AdaptiveThreads] = []   # this process's, once trainer.threads.configure chose it


def start(cores: int, read: Callable[[], CpuSample] = read_sample) -> AdaptiveThreads | None:
    """Take this process's start sample (``configure`` calls it: the worker adapts its threads); None
    where ``/proc`` cannot be read (then the threads stay as configured)."""
    try:
        adaptive = AdaptiveThreads(cores, start=read(), read=read)
    except (OSError, ValueError, IndexError):
        return None
    _PROCESS[:] = [adaptive]
    return adaptive


def for_this_process() -> AdaptiveThreads | None:
    """The adaptive threading :func:`start` set up in this process, or None (fixed threads)."""
    return _PROCESS[0] if _PROCESS else None
