"""``python -m trainer``'s start: the collector is off while the worker's modules are imported, and on,
with what the imports made frozen, when the run's main starts."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.trainer.helpers import ROOT

# ``python -m trainer run SPEC`` with the worker's main replaced: it reports the collector's state
PROBE = textwrap.dedent("""
    import gc, runpy, sys, types
    seen = []
    gc.callbacks.append(lambda phase, info: phase == "start" and seen.append(info["generation"]))
    probe = types.ModuleType("trainer.worker")
    probe.main = lambda early_signals: print(gc.isenabled(), gc.get_freeze_count(), len(seen)) or 0
    sys.modules["trainer.worker"] = probe
    sys.argv = ["trainer", "run", "no-such-spec.json"]
    runpy.run_module("trainer", run_name="__main__")
""")


@pytest.mark.process
def test_the_worker_imports_without_the_collector_and_runs_with_it_on_the_imports_frozen():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    enabled, frozen, collections = out.stdout.split()
    assert enabled == "True"                  # never left off for the run
    assert int(frozen) > 1000                 # the interpreter's and the imports' objects
    # none while its start imported the modules (124 with the collector on): one may come before its first line
    assert int(collections) <= 2
