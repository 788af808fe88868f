"""Memory figures for the ``memory`` event: CUDA allocator counters, or the process RSS on a CPU."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

import torch

from ..protocol.events import Memory
from .heap import release_free_heap


def memory_sample(device: torch.device, step: int | None = None) -> Memory:
    """Allocated/reserved/peak bytes on CUDA; resident set size and its peak on the CPU."""
    if device.type == "cuda" and torch.cuda.is_available():
        return cuda_sample(device, step)
    rss = rss_bytes()
    # The kernel's high-water mark trails the RSS it counts now (threads' counters reach it in batches):
    # a peak is never below what the process holds at this moment.
    return Memory(step=step, device=str(device), rss=rss, peak_rss=max(peak_rss_bytes(), rss))


def cuda_sample(device: torch.device, step: int | None = None) -> Memory:
    """The caching allocator's counters: allocated, reserved and peak bytes; active and
    inactive-split bytes (blocks in use, and freed pieces of split blocks: fragmentation); the
    count of allocation retries (a cudaMalloc that failed, freed the cache and tried again: a sign
    of memory pressure) and of OOMs; and the device's free and total bytes as the driver sees them."""
    stats = torch.cuda.memory_stats(device)
    free, total = torch.cuda.mem_get_info(device)
    return Memory(step=step, device=str(device), allocated=torch.cuda.memory_allocated(device),
                  reserved=torch.cuda.memory_reserved(device), peak=torch.cuda.max_memory_allocated(device),
                  active=int(stats.get("active_bytes.all.current", 0)),
                  inactive_split=int(stats.get("inactive_split_bytes.all.current", 0)),
                  alloc_retries=int(stats.get("num_alloc_retries", 0)), num_ooms=int(stats.get("num_ooms", 0)),
                  free=int(free), total=int(total))


def gpu_utilisation(device: torch.device) -> float | None:
    """The percent of the last sample period the GPU was busy (NVML, through ``torch.cuda.utilization``),
    or None off CUDA or where NVML cannot be read (no ``pynvml``, no driver)."""
    if device.type != "cuda" or not torch.cuda.is_available():
        return None
    try:
        return float(torch.cuda.utilization(device))
    except Exception:  # noqa: BLE001 - pynvml missing, NVML errors of any kind: no curve, never a failed run
        return None


def rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return peak_rss_bytes()


def peak_rss_bytes() -> int:
    """This process's own resident high-water mark: on Linux ``VmHWM`` of ``/proc/self/status``, which
    starts again at exec. ``getrusage``'s ``ru_maxrss`` does not: a child made by fork, or by the vfork
    ``subprocess`` uses, runs in its parent's pages until exec, and exec carries the parent's mark into
    it, so a worker started by the studio reported the studio's RSS as its peak (1,212 MiB at a 731 MiB
    RSS, started from a 1.2 GB parent). ``ru_maxrss`` where /proc has no such line."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource  # POSIX only
    except ImportError:
        return 0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # Linux reports KiB, macOS bytes


TRIM_GROWTH = 4 * 2**20   # bytes of RSS growth above the level that make the next trim
TRIM_EVERY_S = 1.0        # at most one trim in this many seconds


class HeapTrim:
    """:func:`release_free_heap` at a step's end, on the training thread, when the process's RSS has grown by
    more than ``growth`` bytes above its level (the RSS at the end of the first step after the last trim: the
    pages a step takes back after a trim, or its lowest at a check since), checked every ``every_s``.

    The level was once the RSS right after the trim, read every 0.5 s on the recorder thread with 16 MiB of
    growth: a step whose tensors need more than that (most image runs) was trimmed at every check, giving back
    pages the next step faulted in again, and the process's high between two trims was wherever the steps had
    got to when a check came. A run's peak is the highest of those highs, so the longer run peaked higher:
    one epoch of 60,000 JPEGs 751-779 MiB against 748-759 for 6,000 (3 runs each). From a step's own level,
    only growth beyond its working set trims: with 4 MiB, two runs each measured 761-762 against 752-753 MiB.

    Growth that comes back after every trim was still trimmed each time: digits_cnn's 10 epochs trimmed 3-9
    times, at steps scattered over the epochs, each giving back 5-9 MiB that the next steps took again (most
    likely the recorder thread's checkpoint and SQLite buffers, in its own malloc arena, which ``malloc_trim``
    trims too), each page faulted in again. Hence
    ``every_s``: at most a trim a second, so a short run trims a few times, and a long run's growth is still
    given back within a second of training. Between checks a step's end reads only the clock (the RSS read,
    ``/proc/self/statm``, took 14-140 us a step)."""

    def __init__(self, growth: int = TRIM_GROWTH, rss: Callable[[], int] | None = None,
                 trim: Callable[[], None] = release_free_heap, *, every_s: float = TRIM_EVERY_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.growth, self.rss, self.trim = growth, rss or rss_bytes, trim
        self.every_s, self.clock = every_s, clock
        self.level: int | None = None        # None: read at the next step's end (the first, or after a trim)
        self.trims = 0
        self.due = float("-inf")             # the clock's time of the next growth check

    def __call__(self) -> None:
        """At a step's end: note the level, or (every ``every_s``) trim if the process grew past it."""
        if self.level is not None and self.clock() < self.due:
            return                            # a clock read: all most steps pay
        rss = self.rss()
        if self.level is None:
            self.level = rss
            return
        self.due = self.clock() + self.every_s
        if rss - self.level > self.growth:
            self.trim()
            self.trims += 1
            self.level = None
        else:
            self.level = min(self.level, rss)
