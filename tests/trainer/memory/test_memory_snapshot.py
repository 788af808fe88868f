"""A CUDA memory recording is also kept in PyTorch's memory_viz format: the allocator snapshot, pickled as
``torch.cuda.memory._dump_snapshot`` writes it, beside our JSON record in the run directory."""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path

import pytest
import torch
from torch.cuda import _memory_viz

from graph_editor.building import build_module
from tests.trainer.memory.test_memory_predict import template
from trainer.loop import make_train_step
from trainer.memory.timeline import CUDA_MAX_ENTRIES, LiveRecording, parse_cuda, publisher, read_trace
from trainer.optim import make_optimizer
from trainer.spec import OptimSpec

SEG = 2 ** 21


def _frames(name: str) -> list[dict]:
    return [{"filename": "model.py", "line": 3, "name": name}]


def _snapshot() -> dict:
    """What ``torch.cuda.memory._snapshot()`` returns (the allocator's format, one 2 MiB segment)."""
    blocks = [{"address": 0x7000, "size": 1024, "requested_size": 1000, "state": "active_allocated",
               "frames": _frames("forward")},
              {"address": 0x7400, "size": SEG - 1024, "requested_size": 0, "state": "inactive", "frames": []}]
    segment = {"device": 0, "address": 0x7000, "total_size": SEG, "allocated_size": 1024, "active_size": 1024,
               "requested_size": 1000, "stream": 0, "segment_type": "small", "segment_pool_id": (0, 0),
               "is_expandable": False, "frames": [], "blocks": blocks}
    trace = [{"action": "segment_alloc", "addr": 0x7000, "size": SEG, "stream": 0, "time_us": 1, "frames": []},
             {"action": "alloc", "addr": 0x7000, "size": 1024, "stream": 0, "time_us": 2,
              "frames": _frames("forward"), "user_metadata": "fw:conv1"},
             {"action": "alloc", "addr": 0x7400, "size": 512, "stream": 0, "time_us": 3,
              "frames": _frames("backward"), "user_metadata": "bw:conv1"},
             {"action": "free_requested", "addr": 0x7400, "size": 512, "stream": 0, "time_us": 4, "frames": []},
             {"action": "free_completed", "addr": 0x7400, "size": 512, "stream": 0, "time_us": 4, "frames": []}]
    return {"segments": [segment], "device_traces": [trace], "allocator_settings": {}}


def _publish(tmp_path: Path, make) -> dict:
    sent: list[dict] = []
    publish = publisher(tmp_path, lambda event: sent.append(dataclasses.asdict(event)), lambda write: write())
    publish(make, 5, 2, "")
    assert len(sent) == 1 and not sent[0].get("error")
    return sent[0]


def test_a_cuda_recording_saves_the_allocator_snapshot_for_memory_viz(tmp_path):
    snap = _snapshot()
    event = _publish(tmp_path, lambda: parse_cuda(snap, 0))
    record = read_trace(event["path"])
    assert record["cuda_snapshot"] == "trace-step5.pickle"
    pickled = Path(event["path"]).with_name(record["cuda_snapshot"])
    with open(pickled, "rb") as f:          # our own file, written by the test above
        loaded = pickle.load(f)
    assert loaded == snap
    text = _memory_viz.trace(loaded)        # memory_viz's own readers take it
    assert "5 entries" in text and "cudaMalloc" in text
    assert "total_reserved: 2.0MiB" in _memory_viz.segsum(loaded)
    assert "Active Memory Timeline" in _memory_viz.trace_plot(loaded)
    assert "Allocator State History" in _memory_viz.segment_plot(loaded)
    assert not list(tmp_path.rglob("*.tmp"))


@pytest.mark.slow
def test_a_cpu_recording_has_no_snapshot(tmp_path):
    from trainer.memory.timeline import record_job_steps

    g = template("digits_cnn")
    model = build_module(g)
    opt = make_optimizer(model, OptimSpec())
    step, _ = make_train_step(model, opt, device=torch.device("cpu"), precision="fp32", label_smoothing=0.0)
    batch = (torch.randn(8, 1, 8, 8), torch.zeros(8, dtype=torch.long))
    step(*batch)
    event = _publish(tmp_path, lambda: record_job_steps(model, step, [batch]))
    assert "cuda_snapshot" not in read_trace(event["path"])
    assert not list(tmp_path.rglob("*.pickle"))


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_real_cuda_recording_loads_in_memory_viz(tmp_path):
    g = template("resnet18_cifar")
    dev = torch.device("cuda")
    model = build_module(g, device=dev)
    opt = make_optimizer(model, OptimSpec())
    step, _ = make_train_step(model, opt, device=dev, precision="fp32", label_smoothing=0.0)
    events: list[dict] = []
    rec = LiveRecording(model, dev, publish=publisher(tmp_path, lambda event: events.append(dataclasses.asdict(event)), lambda w: w()),
                        start_step=lambda: 0, opt=opt)
    wrapped = rec.wrap_step(step)
    x, y = torch.randn(8, 3, 32, 32, device=dev), torch.zeros(8, dtype=torch.long, device=dev)
    wrapped(x, y)
    rec.request()
    wrapped(x, y)
    wrapped(x, y)
    assert len(events) == 1 and not events[0].get("error")
    record = read_trace(events[0]["path"])
    with open(Path(events[0]["path"]).with_name(record["cuda_snapshot"]), "rb") as f:
        snap = pickle.load(f)
    index = torch.cuda.current_device()
    entries = snap["device_traces"][index]
    assert 0 < len(entries) <= CUDA_MAX_ENTRIES
    assert any(e.get("user_metadata", "").startswith("bw:") for e in entries)
    assert "entries" in _memory_viz.trace(snap) and "total_reserved" in _memory_viz.segsum(snap)
    assert "Active Memory Timeline" in _memory_viz.trace_plot(snap)
    assert "Allocator State History" in _memory_viz.segment_plot(snap)
    assert record["summary"]["attributed"] >= 0.99
