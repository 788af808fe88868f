"""Memory figures for the ``memory`` event: CUDA allocator counters, or the process RSS on a CPU."""

from __future__ import annotations

import os
import sys

import torch


def memory_sample(device: torch.device) -> dict[str, int | str]:
    """Allocated/reserved/peak bytes on CUDA; resident set size and its peak on the CPU."""
    if device.type == "cuda":
        return {"device": str(device), "allocated": torch.cuda.memory_allocated(device),
                "reserved": torch.cuda.memory_reserved(device), "peak": torch.cuda.max_memory_allocated(device)}
    return {"device": str(device), "rss": rss_bytes(), "peak_rss": peak_rss_bytes()}


def rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return peak_rss_bytes()


def peak_rss_bytes() -> int:
    try:
        import resource  # POSIX only
    except ImportError:
        return 0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # Linux reports KiB, macOS bytes
