"""What a GPU machine adds to sweeps and system curves, with the device count and NVML's reading mocked
(no GPU here; ``make gpu-check`` runs the real thing): one trial slot per GPU, and the GPU's
utilisation as a system curve of a run."""

from __future__ import annotations

import json

import pytest
import torch

from tests.trainer.helpers import DIGITS_CNN
from trainer.memory.samples import gpu_utilisation
from trainer.metrics import names
from trainer.sweep import Sweep, SweepPlan
from trainer.sweep.runner import free_gpu, gpu_slots


@pytest.fixture
def two_gpus(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)


def test_each_trial_takes_the_gpu_fewest_trials_use():
    assert free_gpu([], 0) is None and free_gpu([None, None], 0) is None     # CPU processes
    assert [free_gpu(used, 2) for used in ([], [0], [0, 1], [1], [0, 1, 0])] == [0, 1, 0, 0, 1]


def test_a_sweep_spreads_over_every_visible_gpu_unless_one_is_named(two_gpus):
    assert (gpu_slots("auto"), gpu_slots("cuda"), gpu_slots("cuda:1"), gpu_slots("cpu")) == (2, 2, 0, 0)


def test_two_trials_at_once_start_on_two_gpus(two_gpus, tmp_path, monkeypatch):
    """Two trials at once take cuda:0 and cuda:1; the one that ends first (the second) frees its GPU for the
    third, which takes the GPU no trial uses (not the next in turn)."""
    import trainer.sweep.runner as runner

    started: list[dict] = []
    lives = iter([3, 1, 1])          # polls each stand-in worker answers before it ends: the second ends first

    class Worker:       # the trial's worker as far as the sweep drives it (no GPU here to train on)
        def __init__(self) -> None:
            self.polls, self.exit_code = next(lives), None

        def poll(self) -> list:
            self.polls -= 1
            if self.polls <= 0:
                self.exit_code = 0
            return []

        def crash_reason(self, code: int) -> str:
            return f"a stand-in worker (exit {code})"

        def stop(self) -> None: ...

        def kill(self) -> None: ...

    def run(path, **_kwargs):
        started.append(json.loads(path.read_text()))
        return Worker()

    monkeypatch.setattr(runner.WorkerClient, "run", staticmethod(run))
    lines: list[str] = []
    result = Sweep(SweepPlan(graph=str(DIGITS_CNN), space="lr=1e-3..1e-2:log", trials=3, parallel=2,
                             db=f"sqlite:///{tmp_path / 'runs.sqlite'}", study="gpus", device="cuda"),
                   log=lines.append).run()
    assert [s["device"] for s in started] == ["cuda:0", "cuda:1", "cuda:1"]
    assert [line.split("; ")[-1] for line in lines if " started " in line] == ["cuda:0)", "cuda:1)", "cuda:1)"]
    assert len(result["trials"]) == 3


def test_the_gpu_s_utilisation_is_read_through_nvml_and_never_fails_a_run(monkeypatch):
    assert gpu_utilisation(torch.device("cpu")) is None
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "utilization", lambda device=None: 57)
    assert gpu_utilisation(torch.device("cuda", 0)) == 57.0

    def no_nvml(device=None):
        raise ModuleNotFoundError("No module named 'pynvml'")

    monkeypatch.setattr(torch.cuda, "utilization", no_nvml)
    assert gpu_utilisation(torch.device("cuda", 0)) is None
    from studio.training.run_history import CURVES

    assert CURVES[names.GPU_UTIL.name].startswith("GPU utilisation")


@pytest.mark.slow   # ~2.7 s: in make test, not test-fast
def test_cpu_trials_at_once_share_the_cores_with_the_threads_divided(tmp_path, monkeypatch):
    """Without GPUs, P trials at once are P processes: each gets cores // P threads (TORCH_STUDIO_THREADS),
    so that together they do not ask for more threads than there are cores, and never fewer than one."""
    import trainer.sweep.runner as runner
    from trainer.threads import SWITCH

    envs: list[dict] = []

    class Worker:       # a stand-in that ends at its first poll (the threads it is given are what is proven)
        exit_code = 0

        def poll(self) -> list:
            return []

        def crash_reason(self, code: int) -> str:
            return f"a stand-in worker (exit {code})"

        def kill(self) -> None: ...

    def run(path, **kwargs):
        envs.append(kwargs["env"])
        return Worker()

    monkeypatch.delenv(SWITCH, raising=False)
    monkeypatch.setattr(runner.WorkerClient, "run", staticmethod(run))
    for cores, study in ((8, "eight"), (2, "two")):
        monkeypatch.setattr(runner, "usable_cores", lambda cores=cores: cores)
        Sweep(SweepPlan(graph=str(DIGITS_CNN), space="lr=1e-3..1e-2:log", trials=3, parallel=3,
                        db=f"sqlite:///{tmp_path / 'runs.sqlite'}", study=study, device="cpu")).run()
    assert [e[SWITCH] for e in envs] == ["2", "2", "2", "1", "1", "1"]
