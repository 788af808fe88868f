"""A CPU worker gives the C heap's free pages back once it has grown: glibc keeps the pages of freed
batch-sized blocks resident (after the first steps it serves them from its heap, not mmap), and a run's
peak RSS grew with its length (600 steps against 60 of an image folder: +63 to +81 MiB). A heap that only
churns is left alone: trimming it at every check cost digits_cnn 15% of its CPU in page faults. The level
is read at the end of the step after a trim: the pages that step takes back are its working set, not growth."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.trainer.helpers import ROOT
from trainer.memory.samples import HeapTrim

SCRIPT = textwrap.dedent("""
    import ctypes, ctypes.util
    from trainer.memory.samples import HeapTrim, rss_bytes
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    M = 2**20
    trim = HeapTrim()
    trim()                # the first step's end: its level
    start = rss_bytes()
    p = libc.malloc(8 * M); ctypes.memset(p, 1, 8 * M); libc.free(p)   # glibc's mmap threshold rises to 8 MiB
    big, pins = [], []
    for _ in range(50):   # 100 MiB of 2 MiB blocks from the heap (a batch's size), each followed by one that stays
        big.append(libc.malloc(2 * M)); ctypes.memset(big[-1], 1, 2 * M)
        pins.append(libc.malloc(100 * 1024))
    for b in big:
        libc.free(b)
    kept = rss_bytes()
    trim()                # grown by 100 MiB: trims
    print((kept - start) / M, (kept - rss_bytes()) / M, trim.trims)
""")


@pytest.mark.process
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's heap")
def test_a_grown_heap_hands_its_freed_pages_back():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=ROOT, timeout=120,
                         check=True).stdout.split()
    kept, released, trims = float(out[0]), float(out[1]), int(out[2])
    assert kept > 80, f"the freed blocks were not kept resident ({kept:.0f} MiB): the setup no longer shows it"
    assert released > 80 and trims == 1, f"the check released {released:.0f} of the {kept:.0f} MiB freed"


def test_a_heap_that_only_churns_is_not_trimmed():
    """Each step's end reads the RSS; only a rise of more than ``growth`` above its level trims."""
    M, rss, trimmed = 2**20, [100 * 2**20], []

    def trim() -> None:
        trimmed.append(rss[0])
        rss[0] -= 4 * M                      # what a trim gives back

    check = HeapTrim(growth=16 * M, rss=lambda: rss[0], trim=trim, every_s=0.0)
    check()
    for churn in (9, 2, 12, 0, 15, 1):        # a step's blocks freed and allocated again: under the threshold
        rss[0] = 96 * M + churn * M
        check()
    assert check.trims == 0 and check.level == 96 * M
    rss[0] = 96 * M + 17 * M                  # kept pages: grown past it
    check()
    assert check.trims == 1 and rss[0] == 109 * M


def test_the_step_after_a_trim_takes_its_pages_back_untrimmed():
    """After a trim the next steps fault their working set in again (here 20 MiB, above ``growth``): that
    is the level from then on, not growth to trim again; only growth above it trims."""
    M, rss = 2**20, [100 * 2**20]

    def trim() -> None:
        rss[0] = 80 * M                      # the step's freed pages given back

    check = HeapTrim(growth=16 * M, rss=lambda: rss[0], trim=trim, every_s=0.0)
    check()
    rss[0] = 117 * M
    check()                                   # grown 17 MiB: trimmed to 80
    assert check.trims == 1
    for _ in range(5):                        # each step takes its 20 MiB back
        rss[0] = 100 * M
        check()
    assert check.trims == 1 and check.level == 100 * M
    rss[0] = 117 * M
    check()
    assert check.trims == 2


def test_growth_that_comes_back_after_each_trim_is_trimmed_at_most_once_a_second():
    """Pages another thread takes back after every trim (the recorder's checkpoint buffers, in its own arena):
    trimmed at every step's end they were faulted in again each time (digits_cnn: 8-9 trims in 10 epochs).
    A trim waits until ``every_s`` have passed since the last; the growth is still found at each step's end."""
    M, rss, now = 2**20, [100 * 2**20], [0.0]

    def trim() -> None:
        rss[0] = 100 * M

    check = HeapTrim(growth=4 * M, rss=lambda: rss[0], trim=trim, every_s=1.0, clock=lambda: now[0])
    check()
    for i in range(20):                       # 20 steps, 0.1 s apart: each time 6 MiB come back
        now[0] = (i + 1) / 10
        rss[0] += 6 * M
        check()
        check()                               # the level after a trim (or no change)
    assert check.trims == 2, f"{check.trims} trims in 2 s of steps"
    now[0] = 3.0
    rss[0] += 6 * M
    check()
    assert check.trims == 3 and rss[0] == 100 * M
