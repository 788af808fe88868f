"""The worker's C heap keeps what a step frees for the next step: with glibc's moving thresholds, a step
whose blocks rise and fall by more than twice its largest gave its pages back at every step and faulted each
of them in again at the next (digits_cnn's 10 epochs: 55,000-200,000 faults from run to run, 10-30% slower)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from tests.trainer.helpers import DIGITS_CNN, ROOT
from tests.trainer.image_files import write_folder

# A step's pattern: four 1 MiB blocks (its activations) taken, written and freed, twenty times; the page
# faults of the last nineteen. A first 1 MiB block freed moves glibc's thresholds as a run's first step does.
STEPS = textwrap.dedent("""
    import ctypes, ctypes.util, resource

    def step_faults():
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
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
""")
SCRIPT = STEPS + textwrap.dedent("""
    import sys
    from trainer.memory.heap import keep_freed_heap
    kept = keep_freed_heap() if sys.argv[1] == "keep" else None
    print(kept, step_faults())
""")
# ``python -m trainer run SPEC`` as it starts, with the worker's main (torch, the run) replaced by the steps
WORKER_START = STEPS + textwrap.dedent("""
    import runpy, sys, types
    probe = types.ModuleType("trainer.worker")
    probe.main = lambda early_signals: print("faults", step_faults()) or 0
    sys.modules["trainer.worker"] = probe
    sys.argv = ["trainer", "run", sys.argv[1]]
    runpy.run_module("trainer", run_name="__main__")
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


@pytest.mark.process
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's heap")
def test_the_worker_command_starts_the_thresholds_only_for_data_held_in_memory(tmp_path):
    """``python -m trainer`` frees the block before the run's main: a run of the digits keeps its steps' pages;
    a run streaming image files keeps glibc's own start (their loader workers' memory peaked higher without)."""
    write_folder(tmp_path / "images")
    faults = {}
    for name, data in (("digits", {"dataset": "digits"}), ("images", {"dataset": str(tmp_path / "images")})):
        spec = tmp_path / f"{name}.json"
        spec.write_text(json.dumps({"schema_version": 2, "model": {"graph": str(DIGITS_CNN)}, "data": data}))
        out = subprocess.run([sys.executable, "-c", WORKER_START, str(spec)], capture_output=True, text=True,
                             cwd=ROOT, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        faults[name] = int(out.stdout.split("faults")[-1].split()[0])
    assert faults["digits"] < 200, f"the worker command's 19 steps faulted {faults['digits']} pages: not started"
    assert faults["images"] > 19 * 512, f"an image run's steps faulted only {faults['images']} pages: started"
