"""The worker's CPU threading: bounded OpenMP spinning (passive waiting on another OpenMP runtime), one
thread per core it may really use."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from trainer.threads import SPIN_COUNT, SWITCH, configure, cpu_quota, gnu_openmp, plan, usable_cores

from .helpers import ROOT

pytestmark = pytest.mark.process


def test_every_usable_core_and_a_bounded_spin():
    chosen = plan({}, cores=4)
    assert (chosen.threads, chosen.wait_policy, chosen.spin_count) == (4, None, SPIN_COUNT)
    # Another OpenMP runtime (libomp, vcomp): GOMP_SPINCOUNT means nothing to it, so passive waiting.
    chosen = plan({}, cores=4, gnu=False)
    assert (chosen.threads, chosen.wait_policy, chosen.spin_count) == (4, "PASSIVE", None)


def test_the_users_own_settings_win():
    chosen = plan({"OMP_NUM_THREADS": "3"}, cores=8)
    assert (chosen.threads, chosen.spin_count) == (None, SPIN_COUNT) and "(3)" in chosen.reason
    assert plan({"MKL_NUM_THREADS": "5"}, cores=8).threads is None
    for waiting in ({"OMP_WAIT_POLICY": "ACTIVE"}, {"GOMP_SPINCOUNT": "1000"}):
        chosen = plan(waiting, cores=8)
        assert (chosen.threads, chosen.wait_policy, chosen.spin_count) == (8, None, None)
    assert plan({SWITCH: "default"}, cores=8) == plan({SWITCH: " Default "}, cores=2)
    assert (plan({SWITCH: "default"}, cores=8).threads, plan({SWITCH: "default"}, cores=8).wait_policy) == (None, None)
    assert plan({SWITCH: "3"}, cores=8).threads == 3


def test_a_bad_switch_is_named_and_ignored(capsys):
    assert plan({SWITCH: "lots"}, cores=2).threads == 2
    assert plan({SWITCH: "-1"}, cores=2).threads == 2
    assert "TORCH_STUDIO_THREADS='lots'" in capsys.readouterr().err


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


def test_torchs_openmp_is_found_without_importing_torch():
    """The Linux wheels this project runs on bundle GNU OpenMP; finding it must not import torch (the
    runtime reads its environment when torch loads)."""
    code = "import sys; from trainer.threads import gnu_openmp; print(gnu_openmp(), 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         check=True).stdout
    assert out.split() == [str(sys.platform == "linux"), "False"]


def test_configure_sets_the_environment_torch_reads_when_imported():
    env = {SWITCH: "1"}
    chosen = configure(env)
    assert env["OMP_NUM_THREADS"] == env["MKL_NUM_THREADS"] == "1" and chosen.threads == 1
    assert env.get("GOMP_SPINCOUNT") == str(SPIN_COUNT) if gnu_openmp() else env["OMP_WAIT_POLICY"] == "PASSIVE"
    # In a fresh process, as the worker's entry does it: configure first, then torch.
    code = ("from trainer.threads import configure; configure(); import torch, os; "
            "print(torch.get_num_threads(), os.environ.get('GOMP_SPINCOUNT'), os.environ.get('OMP_WAIT_POLICY'))")
    clean = {k: v for k, v in os.environ.items()
             if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**clean, SWITCH: "1"},
                         capture_output=True, text=True, timeout=120, check=True).stdout
    assert out.split() == ["1", str(SPIN_COUNT), "None"]
