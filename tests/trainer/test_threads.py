"""The worker's CPU threading: one thread per core it may really use, passive OpenMP waiting where the
count is fixed (the adaptive default: tests/trainer/test_adaptive_threads.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from trainer.threads import SWITCH, configure, cpu_quota, plan, usable_cores

from .helpers import ROOT

pytestmark = pytest.mark.process


def test_every_usable_core_and_passive_waiting():
    chosen = plan({SWITCH: "passive"}, cores=4)
    assert (chosen.threads, chosen.wait_policy) == (4, "PASSIVE")
    assert plan({}, cores=4).threads == 4


def test_the_users_own_settings_win():
    chosen = plan({"OMP_NUM_THREADS": "3"}, cores=8)
    assert (chosen.threads, chosen.wait_policy) == (None, "PASSIVE") and "(3)" in chosen.reason
    assert plan({"MKL_NUM_THREADS": "5"}, cores=8).threads is None
    chosen = plan({"OMP_WAIT_POLICY": "ACTIVE", SWITCH: "passive"}, cores=8)
    assert (chosen.threads, chosen.wait_policy) == (8, None)
    assert plan({SWITCH: "default"}, cores=8) == plan({SWITCH: " Default "}, cores=2)
    assert (plan({SWITCH: "default"}, cores=8).threads, plan({SWITCH: "default"}, cores=8).wait_policy) == (None, None)
    assert plan({SWITCH: "3"}, cores=8).threads == 3


def test_a_bad_switch_is_named_and_ignored(capsys):
    assert plan({SWITCH: "lots"}, cores=2) == plan({}, cores=2)
    assert plan({SWITCH: "-1"}, cores=2).threads == 2
    err = capsys.readouterr().err
    assert "TORCH_STUDIO_THREADS='lots' is none of adaptive, passive, default or a thread count" in err


def test_a_containers_cpu_quota_caps_the_threads(tmp_path):
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "cpu.max").write_text("50000 100000\n")          # half a CPU: one thread
    assert cpu_quota(v2) == 0.5 and usable_cores(v2) == 1
    (v2 / "cpu.max").write_text("max 100000\n")
    assert cpu_quota(v2) is None and usable_cores(v2) == len(os.sched_getaffinity(0))
    v1 = tmp_path / "v1"
    (v1 / "cpu").mkdir(parents=True)
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("150000\n")
    (v1 / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert cpu_quota(v1) == 1.5 and usable_cores(v1) == min(2, len(os.sched_getaffinity(0)))
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    assert cpu_quota(v1) is None
    assert cpu_quota(tmp_path / "none") is None


def test_configure_sets_the_environment_torch_reads_when_imported():
    env = {SWITCH: "1"}
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
