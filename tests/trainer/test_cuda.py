"""GPU paths (skipped without CUDA; ``make gpu-check`` runs them): bf16 + compile, fp16 + grad scaler."""

from __future__ import annotations

import pytest
import torch

from .conftest import DIGITS_CNN, run_worker, write_spec

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


@pytest.mark.parametrize("precision", [{"dtype": "bf16", "compile": "default", "channels_last": True},
                                       {"dtype": "fp16", "compile": "off"}])
def test_mixed_precision_runs_on_the_gpu(tmp_path, db, precision):
    spec = write_spec(tmp_path, DIGITS_CNN, device="cuda", precision=precision, train={"epochs": 3})
    code, events, stderr = run_worker(spec, db, timeout=600)
    assert code == 0, stderr
    started, finished = events[0], events[-1]
    assert started["device"].startswith("cuda") and finished["status"] == "completed"
    assert finished["test_accuracy"] > 0.9
    memory = [e for e in events if e["event"] == "memory"]
    assert memory and memory[-1]["peak"] >= memory[-1]["allocated"] > 0
    assert ("compile_done" in [e["event"] for e in events]) == (precision["compile"] != "off")


def test_resume_on_the_gpu_restores_the_grad_scaler(tmp_path, db):
    from trainer.client import WorkerClient

    spec = write_spec(tmp_path, DIGITS_CNN, device="cuda", precision={"dtype": "fp16"}, train={"epochs": 50})
    with WorkerClient.run(spec, db=db) as w:
        for e in w.events(timeout=300):
            if e["event"] == "epoch_end":
                w.stop()
        assert w.wait(60) == 0
    run_id = e["run_id"]
    with WorkerClient.resume(run_id, db=db) as w:
        events = list(w.events(timeout=600))
        assert w.wait(60) == 0, w.stderr
    assert events[0]["start_step"] > 0 and events[-1]["status"] == "completed"
