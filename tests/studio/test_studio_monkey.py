"""The seeded monkey (:mod:`tests.studio.monkey`) over the main window, in its own process so a
segfault fails this test with the seed instead of ending the test session."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.qt, pytest.mark.process]

ROOT = Path(__file__).resolve().parents[2]
# A fixed number of events, not a time: a busy machine does the same work, only slower.
EVENTS = int(os.environ.get("TORCH_STUDIO_MONKEY_EVENTS", "300"))
SECONDS = 300.0  # a bound that only a hang reaches


@pytest.mark.parametrize("seed", [1])
def test_random_real_events_raise_nothing_and_crash_nothing(seed):
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "tests.studio.monkey", "--seed", str(seed),
                           "--seconds", str(SECONDS), "--events", str(EVENTS)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=SECONDS + 120)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines, (f"the monkey (seed {seed}) died with exit code {proc.returncode} before its report "
                   f"(a segfault is -11):\n{proc.stderr[-3000:]}")
    report = json.loads(lines[-1])
    assert not report["problems"], (f"seed {seed}: " + "\n".join(report["problems"])
                                    + "\nlast events:\n" + "\n".join(report["last_events"]))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert report["events"] == EVENTS, report  # it really ran them all
    assert sum(report["kinds"].values()) == report["events"]
