"""The worker's C heap keeps what a step frees for the next step: with glibc's moving thresholds, a step
whose blocks rise and fall by more than twice its largest gave its pages back at every step and faulted each
of them in again at the next (digits_cnn's 10 epochs: 55,000-200,000 faults from run to run, 10-30% slower)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.trainer.helpers import ROOT

# A step's pattern: four 1 MiB blocks (its activations) taken, written and freed, twenty times; the page
# faults of the last nineteen. A first 1 MiB block freed moves glibc's thresholds as a run's first step does.
SCRIPT = textwrap.dedent("""
    import ctypes, ctypes.util, resource, sys
    from trainer.memory.heap import keep_freed_heap
    kept = keep_freed_heap() if sys.argv[1] == "keep" else None
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    M = 2**20
    p = libc.malloc(M); ctypes.memset(p, 1, M); libc.free(p)

    def step():
        blocks = [libc.malloc(M) for _ in range(4)]
        for b in blocks:
            ctypes.memset(b, 1, M)
        for b in blocks:
            libc.free(b)

    step()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(19):
        step()
    print(kept, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
""")


def faults(mode: str) -> tuple[str, int]:
    out = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, cwd=ROOT,
                         timeout=120, check=True).stdout.split()
    return out[0], int(out[1])


@pytest.mark.process
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's heap")
def test_the_pages_a_step_frees_are_kept_for_the_next_step():
    _, default = faults("default")
    assert default > 19 * 512, f"glibc's own thresholds faulted only {default} pages: the setup no longer shows it"
    kept, held = faults("keep")
    assert kept == "True", "no block could be freed to start the thresholds"
    assert held < 200, f"19 steps faulted {held} pages with the thresholds started (without: {default})"
