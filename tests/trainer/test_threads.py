"""The worker's CPU threading: passive OpenMP waiting, threads from the cores free now."""

from __future__ import annotations

import os
import subprocess
import sys

from trainer.threads import SWITCH, busy_elsewhere, configure, plan

from .conftest import ROOT


def test_a_quiet_machine_gets_every_core_and_passive_waiting():
    chosen = plan({}, cores=4, busy=lambda: 0.0)
    assert (chosen.threads, chosen.wait_policy) == (4, "PASSIVE")


def test_threads_shrink_with_the_load_and_never_below_one():
    assert plan({}, cores=4, busy=lambda: 1.4).threads == 3
    assert plan({}, cores=2, busy=lambda: 2.0).threads == 1     # the case: two CPU-bound processes
    assert plan({}, cores=2, busy=lambda: 9.0).threads == 1


def test_the_users_own_settings_win():
    chosen = plan({"OMP_NUM_THREADS": "3"}, cores=8, busy=lambda: 7.0)
    assert (chosen.threads, chosen.wait_policy) == (None, "PASSIVE") and "(3)" in chosen.reason
    chosen = plan({"OMP_WAIT_POLICY": "ACTIVE"}, cores=8, busy=lambda: 0.0)
    assert (chosen.threads, chosen.wait_policy) == (8, None)
    assert plan({SWITCH: "default"}, cores=8, busy=lambda: 7.0) == plan({SWITCH: "Default "}, 8, lambda: 0.0)
    assert plan({SWITCH: "default"}, cores=8, busy=lambda: 7.0).threads is None
    assert plan({SWITCH: "3"}, cores=8, busy=lambda: 7.0).threads == 3


def test_a_bad_switch_is_named_and_ignored(capsys):
    assert plan({SWITCH: "lots"}, cores=2, busy=lambda: 0.0).threads == 2
    assert "TORCH_STUDIO_THREADS='lots'" in capsys.readouterr().err


def test_busy_counts_only_load_that_persists_across_samples():
    readings = iter(["0.5 0.4 0.3 5/300 1", "0.5 0.4 0.3 3/300 1", "0.5 0.4 0.3 4/300 1"])
    assert busy_elsewhere(samples=3, interval_s=0, read=lambda: next(readings)) == 2.0   # least of 4, 2, 3
    assert busy_elsewhere(samples=2, interval_s=0, read=lambda: "0 0 0 1/10 1") == 0.0  # only this process
    assert busy_elsewhere(samples=1, interval_s=0) >= 0.0                              # the real /proc


def test_configure_sets_the_environment_torch_reads_when_imported():
    env = {SWITCH: "1", "PATH": os.environ.get("PATH", "")}
    chosen = configure(env)
    assert env["OMP_WAIT_POLICY"] == "PASSIVE" and env["OMP_NUM_THREADS"] == env["MKL_NUM_THREADS"] == "1"
    assert chosen.threads == 1
    # In a fresh process, as the worker's entry does it: configure first, then torch.
    code = ("from trainer.threads import configure; configure(); import torch, os; "
            "print(torch.get_num_threads(), os.environ['OMP_WAIT_POLICY'])")
    clean = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY")}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**clean, SWITCH: "1"},
                         capture_output=True, text=True, timeout=120, check=True).stdout
    assert out.split() == ["1", "PASSIVE"]
