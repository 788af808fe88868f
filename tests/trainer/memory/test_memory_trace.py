"""The recorded memory timeline of real CPU steps: every allocated byte attributed to a node or phase."""

from __future__ import annotations

import json

import pytest
import torch

from graph_editor.building import build_module
from tests.trainer.helpers import write_spec
from tests.trainer.memory.test_memory_predict import template
from tests.trainer.test_inspect_worker import _until
from trainer.loop import make_train_step
from trainer.memory.timeline import AUTOGRAD, LOSS, OPT, PHASES, UNKNOWN, read_trace, record_job_steps
from trainer.optim import make_optimizer
from trainer.protocol.client import WorkerClient
from trainer.protocol.events import MemoryTimeline, RecordMemory
from trainer.spec import OptimSpec

pytestmark = pytest.mark.process


def test_two_steps_attributed_to_nodes_and_phases(tmp_path):
    g = template("resnet18_cifar")
    torch.manual_seed(0)
    model = build_module(g)
    opt = make_optimizer(model, OptimSpec())
    step, _ = make_train_step(model, opt, device=torch.device("cpu"), precision="fp32", label_smoothing=0.0)
    batch = (torch.randn(4, 3, 32, 32), torch.tensor([0, 1, 2, 3]))
    step(*batch)                                   # the optimizer state exists from here on
    trace = record_job_steps(model, step, [batch, batch])
    s = trace.summary(max_points=500)
    assert s["attributed"] >= 0.99, s["attributed"]
    assert s["steps"] == 2 and s["peak_bytes"] > 0 and s["peak_phase"] in ("forward", "backward", "loss")
    phases = {e.phase for e in trace.events}
    assert {"forward", "backward"} <= phases
    graph_nodes = set(g.nodes)
    assert sum(1 for n in s["at_peak"] if n in graph_nodes) >= 10
    assert set(s["at_peak"]) <= graph_nodes | {LOSS, OPT, AUTOGRAD, UNKNOWN}
    assert s["at_peak"].get(UNKNOWN, 0) <= 0.01 * s["peak_bytes"]   # the step's argmax of the logits, say
    tl = s["timeline"]
    assert 0 < len(tl["t_ms"]) <= 500 and max(tl["live"]) == s["peak_bytes"]
    assert all(len(v) == len(tl["t_ms"]) for v in tl["nodes"].values())
    for key in ("nodes", "phases"):               # by node and by phase, the bands add up to the live bytes
        assert [sum(col) for col in zip(*tl[key].values(), strict=True)] == tl["live"]
    assert max(tl["phases"]["backward"]) > 0 and max(tl["phases"]["forward"]) > 0
    path = trace.save(tmp_path / "memory" / "trace-1.json")
    saved = json.loads(path.read_text())
    assert saved["version"] == 1 and len(saved["events"]) == len(trace.events)


def test_record_memory_command_through_the_real_worker(tmp_path, db):
    spec = write_spec(tmp_path, train={"epochs": 200}, schedule={"name": "constant"})
    with WorkerClient.run(spec, db=db) as w:
        stream = w.events(timeout=60)
        _until(stream, "metrics")
        assert w.send(RecordMemory())
        event = _until(stream, "memory_trace")[-1]
        assert w.stop()
        rest = list(stream)
        assert w.wait(60) == 0, w.stderr
    assert rest[-1].event == "finished"
    # the CPU worker's log says nothing of the profiler's own (issue 22: "ERROR ... gpuGetDeviceCount failed")
    assert not [line for line in w.stderr.splitlines() if "gpuGetDeviceCount" in line or line.startswith("USDT:")]
    assert isinstance(event, MemoryTimeline) and event.error is None and event.steps == 2 and event.step > 0
    assert event.attributed >= 0.99 and event.peak_bytes > 0
    assert set(event.at_peak) & {"conv", "relu", "pool", "fc"}
    assert len(event.timeline["t_ms"]) == len(event.timeline["live"]) <= 2000
    saved = read_trace(event.path)
    assert saved["steps"] == 2 and saved["events"] and saved["summary"]["peak_bytes"] == event.peak_bytes


def test_cuda_trace_entries_are_attributed_by_their_tags():
    from trainer.memory.timeline import parse_cuda

    snap = {"device_traces": [[
        {"action": "alloc", "addr": 1, "size": 512, "time_us": 1, "user_metadata": "fw:conv"},
        {"action": "alloc", "addr": 2, "size": 1024, "time_us": 2, "user_metadata": "fw:(loss)"},
        {"action": "alloc", "addr": 3, "size": 2048, "time_us": 3, "user_metadata": "bw:conv"},
        {"action": "free_requested", "addr": 1, "size": 512, "time_us": 4},
        {"action": "free_completed", "addr": 1, "size": 512, "time_us": 4},
        {"action": "alloc", "addr": 4, "size": 512, "time_us": 5, "user_metadata": "opt:"},
        {"action": "alloc", "addr": 5, "size": 512, "time_us": 6},
    ]]}
    t = parse_cuda(snap, 0)
    assert [(e.nbytes, e.node, e.phase) for e in t.events] == [
        (512, "conv", "forward"), (1024, LOSS, "loss"), (2048, "conv", "backward"), (-512, "conv", "forward"),
        (512, OPT, "optimizer"), (512, UNKNOWN, "")]
    s = t.summary()
    assert s["peak_bytes"] == 3584 + 512 - 512 + 512 and s["attributed"] == (4608 - 512) / 4608
    phases = s["timeline"]["phases"]
    assert list(phases) == list(PHASES)
    assert [phases[p][-1] for p in PHASES] == [0, 1024, 2048, 512, 512]   # the forward's block was freed
    assert max(phases["forward"]) == 512


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_recording_of_two_steps_is_attributed():
    from trainer.memory.timeline import LiveRecording

    g = template("resnet18_cifar")
    dev = torch.device("cuda")
    model = build_module(g, device=dev)
    opt = make_optimizer(model, OptimSpec())
    step, _ = make_train_step(model, opt, device=dev, precision="fp32", label_smoothing=0.0)
    got = []
    rec = LiveRecording(model, dev, publish=lambda make, first, steps, error: got.append((make, error)),
                        start_step=lambda: 0, opt=opt)
    wrapped = rec.wrap_step(step)
    x, y = torch.randn(8, 3, 32, 32, device=dev), torch.zeros(8, dtype=torch.long, device=dev)
    wrapped(x, y)
    rec.request()
    wrapped(x, y)
    wrapped(x, y)
    assert len(got) == 1 and got[0][1] == ""
    s = got[0][0]().summary()
    assert s["attributed"] >= 0.99 and s["peak_bytes"] > 0
    assert any(n in g.nodes for n in s["at_peak"])
