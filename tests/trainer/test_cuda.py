"""GPU paths (skipped without CUDA; ``make gpu-check`` runs them): bf16 + compile, fp16 + grad scaler,
out-of-memory failures, fp8."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

from graph_editor.model import Graph, InputSpec
from trainer.store.runs import RunStore

from .helpers import DIGITS_CNN, run_worker, write_spec

pytestmark = [pytest.mark.cuda, pytest.mark.process,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


@pytest.mark.parametrize("precision", [{"dtype": "bf16", "compile": "default", "channels_last": True},
                                       {"dtype": "fp16", "compile": "off"}])
def test_mixed_precision_runs_on_the_gpu(tmp_path, db, precision):
    spec = write_spec(tmp_path, DIGITS_CNN, device="cuda", precision=precision, train={"epochs": 3})
    code, events, stderr = run_worker(spec, db, timeout=600)
    assert code == 0, stderr
    started, finished = events[0], events[-1]
    assert started.device.startswith("cuda") and finished.status == "completed"
    assert finished.test_accuracy > 0.9
    memory = [e for e in events if e.event == "memory"]
    assert memory and memory[-1].peak >= memory[-1].allocated > 0
    assert ("compile_done" in [e.event for e in events]) == (precision["compile"] != "off")


def test_resume_on_the_gpu_restores_the_grad_scaler(tmp_path, db):
    from trainer.protocol.client import WorkerClient

    spec = write_spec(tmp_path, DIGITS_CNN, device="cuda", precision={"dtype": "fp16"}, train={"epochs": 50})
    with WorkerClient.run(spec, db=db) as w:
        for e in w.events(timeout=300):
            if e.event == "epoch_end":
                w.stop()
        assert w.wait(60) == 0
    run_id = e.run_id
    with WorkerClient.resume(run_id, db=db) as w:
        events = list(w.events(timeout=600))
        assert w.wait(60) == 0, w.stderr
    assert events[0].start_step > 0 and events[-1].status == "completed"


def wide_mlp(width: int, hidden: int = 1) -> Graph:
    """64 features -> ``hidden`` square Linear layers of ``width`` -> 10 classes."""
    g = Graph(InputSpec((64,)), 10, {"name": "wide"})
    layers: list = [("Input", "input"), ("Linear", "fc0", {"out_features": width}), ("ReLU", "relu0")]
    for i in range(1, hidden + 1):
        layers += [("Linear", f"fc{i}", {"out_features": width}), ("ReLU", f"relu{i}")]
    g.chain(*layers, ("Linear", "head", {"out_features": 10}), ("Output", "output"))
    return g


def flat_data(folder: Path, n: int = 1024) -> str:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, 64)).astype(np.float32)
    y = (x[:, :10].argmax(1)).astype(np.int64)        # learnable: the largest of the first ten features
    np.savez(folder / "flat.npz", x=x, y=y)
    return str(folder / "flat.npz")


def test_out_of_memory_in_training_fails_with_the_peak_figures(tmp_path, db):
    # Weights of 30% of the card: their gradients and AdamW's two moments cannot all fit. The memory
    # gate would refuse the run before it starts; a budget far above the card lets it through to the step.
    total = torch.cuda.get_device_properties(0).total_memory
    width = int((0.3 * total / 4) ** 0.5) // 64 * 64
    spec = write_spec(tmp_path, wide_mlp(width), device="cuda", data={"dataset": flat_data(tmp_path)},
                      train={"batch_size": 64}, memory={"budget_mb": 1e9})
    code, events, stderr = run_worker(spec, db, timeout=300)
    assert code == 1, stderr
    failed = events[-1]
    assert failed.event == "failed" and failed.kind == "oom", failed
    assert "out of memory on cuda:0 (peak" in failed.message
    assert failed.memory["peak"] > 0.5 * total
    run = RunStore(db).run(failed.run_id)
    assert run.status == "failed" and run.error_kind == "oom"


@pytest.mark.parametrize(("budget", "message"), [
    (None, "out of memory: predicted peak"),                        # the gate, from the prediction
    (1e9, "model.graph: the model's weights do not fit"),           # past the gate: placing the weights fails
])
def test_weights_larger_than_the_card_are_refused_before_the_run(tmp_path, db, budget, message):
    total = torch.cuda.get_device_properties(0).total_memory
    width = int((1.2 * total / 4) ** 0.5) // 64 * 64
    memory = {} if budget is None else {"memory": {"budget_mb": budget}}
    spec = write_spec(tmp_path, wide_mlp(width), device="cuda", data={"dataset": flat_data(tmp_path)}, **memory)
    code, events, stderr = run_worker(spec, db, timeout=300)
    assert code == 2, stderr
    assert [e.event for e in events] == ["failed"] and events[0].kind == "oom"
    assert events[0].message.startswith(message), events[0].message
    assert RunStore(db).runs() == []


@pytest.mark.skipif(importlib.util.find_spec("torchao") is None, reason="needs torchao")
def test_fp8_trains_the_wide_linear_layers(tmp_path, db):
    if torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("fp8 needs compute capability 8.9 or newer")
    spec = write_spec(tmp_path, wide_mlp(256, hidden=2), device="cuda", data={"dataset": flat_data(tmp_path, 4096)},
                      precision={"dtype": "fp8", "compile": "default"}, train={"epochs": 5, "batch_size": 128},
                      optim={"lr": 0.003})
    code, events, stderr = run_worker(spec, db, timeout=600)
    assert code == 0, stderr
    assert events[-1].status == "completed" and events[-1].test_accuracy > 0.8
    assert "compile_done" in [e.event for e in events]
