"""The worker's C heap: what glibc does with the memory a CPU step frees, and giving it back.

A CPU step allocates its activations and gradients (about a MiB each for a small convnet) and frees them at
its end. glibc's malloc serves a block of 128 KiB or more from a fresh ``mmap`` until it has freed one, then
raises that threshold to the largest block freed (up to 32 MiB) and gives the free top of its heap back to
the system whenever that top exceeds twice the threshold. For a step whose blocks rise and fall by more than
twice its largest, that is a give-back at every step and a page fault for each page at the next:
digits_cnn's 10 epochs faulted 55,000-200,000 pages in training from run to run (where long-lived blocks
landed decided whether the top could be given back), and the runs that faulted most spent 0.3-0.5 s of
system time and took 10-30% longer.

So a worker whose data is held in memory frees a 4 MiB block from ``mmap`` when it starts
(:func:`keep_freed_heap`), as its first steps would have: the thresholds start at 4 MiB (mmap) and 8 MiB
(trim), and still rise with the larger blocks a run frees. The same runs then faulted 6,400-10,000 pages in
training, every run (a 2 MiB block left them faulting: a trim threshold of 4 MiB is below digits_cnn's step).
A run that streams image files through loader workers keeps glibc's own start: with the thresholds started at
4 or 8 MiB, ten epochs of 300 JPEGs peaked at 783-851 MiB in 4 of 8 runs, against 776-790 MiB in 6 of 6
without (likely: the trim threshold is global and each allocating thread's arena keeps a top that large; a
later run at glibc's own start reached 848 MiB once, so that is not the whole cause). Growth beyond
a step's working set is given back by :class:`~trainer.memory.samples.HeapTrim` (:func:`release_free_heap`).

Torch-free: ``trainer/__main__.py`` calls it before importing torch.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

PRIME = 4 * 2**20   # the block freed at the start: thresholds of 4 MiB (mmap) and 8 MiB (trim)


def _glibc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim.argtypes, libc.malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
        libc.malloc.argtypes, libc.malloc.restype = [ctypes.c_size_t], ctypes.c_void_p
        libc.free.argtypes, libc.free.restype = [ctypes.c_void_p], None
    except (OSError, AttributeError):   # not glibc (musl has no malloc_trim)
        return None
    return libc


_LIBC = _glibc()


def keep_freed_heap() -> bool:
    """Free a :data:`PRIME` block from ``mmap`` now, as a run's first steps would: glibc's thresholds start at
    4 MiB (mmap) and 8 MiB (trim) and still follow the larger blocks a run frees. False where the C library
    is not glibc or the block cannot be had."""
    if _LIBC is None:
        return False
    block = _LIBC.malloc(PRIME)
    if not block:
        return False
    _LIBC.free(block)
    return True


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
