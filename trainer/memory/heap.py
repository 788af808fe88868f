"""The worker's C heap: what glibc does with the memory a CPU step frees, and giving it back.

A CPU step allocates its activations and gradients (a few MiB each for a small convnet) and frees them at
its end. glibc's malloc serves a block of 128 KiB or more from a fresh ``mmap`` until it has freed one,
then raises that threshold to the largest block freed (up to 32 MiB), and gives the free top of its heap
back to the system whenever that top exceeds twice the threshold. For a step whose working set rises and
falls by more than a couple of its largest blocks, that is a give-back at every step and a page fault for
each page at the next: digits_cnn's 10 epochs faulted 55,000-200,000 pages in training from run to run
(the layout of long-lived blocks above the step's decides whether the top can be given back), and the runs
that faulted most spent 0.3-0.5 s of system time and took 10-30% longer.

So the worker fixes both thresholds at its start (:func:`keep_freed_heap`, before torch is imported): blocks
up to 32 MiB (glibc's own ceiling for its moving threshold) come from the heap, and the heap keeps what a
step frees for the next, as PyTorch's CUDA caching allocator does. The same runs then faulted 6,200-7,000
pages in training, every run. A step's peak is unchanged; what the heap keeps beyond it, when the process
grows, :class:`~trainer.memory.samples.HeapTrim` gives back with :func:`release_free_heap`.

Torch-free: ``trainer/__main__.py`` calls it before importing torch.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3     # glibc's malloc.h
MMAP_THRESHOLD = 32 * 2**20      # blocks below this come from the heap (glibc's dynamic ceiling on 64-bit)
TRIM_THRESHOLD = 2**30           # the free top the heap keeps before it gives it back by itself


def _glibc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim.argtypes, libc.malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
        libc.mallopt.argtypes, libc.mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    except (OSError, AttributeError):   # not glibc (musl has neither)
        return None
    return libc


_LIBC = _glibc()


def keep_freed_heap() -> bool:
    """Fix glibc's mmap and trim thresholds for this process (:data:`MMAP_THRESHOLD`, :data:`TRIM_THRESHOLD`):
    the pages a step frees stay for the next. False where the C library is not glibc or refuses."""
    if _LIBC is None:
        return False
    return bool(_LIBC.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        _LIBC.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))


def release_free_heap() -> None:
    """Give the C heap's free pages back to the system (glibc's ``malloc_trim``; a no-op elsewhere).

    Without :func:`keep_freed_heap`, glibc raises its mmap threshold to the largest block freed so far, so
    after the first steps a CPU run's batches and activations (a few MB each) come from the heap, and the
    pages they leave free between steps stay resident: measured +67 MiB of ``[heap]`` over 600 steps of a
    60,000-image run, growing with the run's length, not its data. A fixed 128 KiB threshold
    (``MALLOC_MMAP_THRESHOLD_``) cured it but made every step 1.5-2x slower (a fresh mmap and page faults per
    tensor); trimming costs a few ms, at a step's end, when :class:`~trainer.memory.samples.HeapTrim` finds
    the process grown."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
