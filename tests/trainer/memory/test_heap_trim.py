"""A CPU worker gives the C heap's free pages back with each memory sample: glibc keeps the pages of
freed batch-sized blocks resident (after the first steps it serves them from its heap, not mmap), and a
run's peak RSS grew with its length (600 steps against 60 of an image folder: +63 to +81 MiB)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.trainer.helpers import ROOT

pytestmark = pytest.mark.process

SCRIPT = textwrap.dedent("""
    import ctypes, ctypes.util
    import torch
    from trainer.memory.samples import memory_sample, rss_bytes
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    M = 2**20
    start = rss_bytes()
    p = libc.malloc(8 * M); ctypes.memset(p, 1, 8 * M); libc.free(p)   # glibc's mmap threshold rises to 8 MiB
    big, pins = [], []
    for _ in range(50):   # 100 MiB of 2 MiB blocks from the heap (a batch's size), each followed by one that stays
        big.append(libc.malloc(2 * M)); ctypes.memset(big[-1], 1, 2 * M)
        pins.append(libc.malloc(100 * 1024))
    for b in big:
        libc.free(b)
    kept = rss_bytes()
    print((kept - start) / M, (kept - memory_sample(torch.device("cpu")).rss) / M)
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's heap")
def test_a_memory_sample_hands_freed_heap_pages_back():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=ROOT, timeout=120,
                         check=True).stdout.split()
    kept, released = float(out[0]), float(out[1])
    assert kept > 80, f"the freed blocks were not kept resident ({kept:.0f} MiB): the setup no longer shows it"
    assert released > 80, f"the sample released {released:.0f} of the {kept:.0f} MiB freed"
