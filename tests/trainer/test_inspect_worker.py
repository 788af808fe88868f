"""Live inspection through the real worker: the inspect command, the spec's interval, the report file,
the event and the stored figures."""

from __future__ import annotations

import pytest

from trainer.inspection import read_report, reports_from_metrics
from trainer.protocol.client import WorkerClient
from trainer.protocol.events import InspectNow
from trainer.store.runs import RunStore

from .helpers import write_spec

pytestmark = pytest.mark.process


def _until(stream, name):
    seen = []
    for e in stream:
        seen.append(e)
        if e.event == name:
            return seen
    raise AssertionError(f"the stream ended before an '{name}' event: {[e.event for e in seen]}")


def test_inspect_command_emits_a_report_stored_with_the_run(tmp_path, db):
    spec = write_spec(tmp_path, train={"epochs": 200}, schedule={"name": "constant"})
    with WorkerClient.run(spec, db=db) as w:
        stream = w.events(timeout=60)
        _until(stream, "metrics")
        assert w.send(InspectNow())
        event = _until(stream, "inspect")[-1]
        assert w.stop()
        rest = list(stream)
        assert w.wait(60) == 0, w.stderr
    assert rest[-1].event == "finished"
    report = read_report(event.path)
    assert report.step == event.step > 0 and event.nodes == len(report.nodes) == 5
    assert [n.node for n in report.nodes] == ["conv", "relu", "pool", "flat", "fc"]
    conv = report.by_node()["conv"]
    assert conv.grad_w > 0 and conv.weight > 0 and 0 < conv.update_ratio < 1 and conv.backward_s >= 0
    assert report.by_node()["relu"].grad_w is None and 0 <= report.by_node()["relu"].zero_fraction <= 1
    assert event.flags == []
    stored = reports_from_metrics(RunStore(db).metrics(event.run_id))
    assert [r.step for r in stored] == [report.step]
    assert stored[0].by_node()["conv"].grad_w == conv.grad_w


def test_spec_interval_inspects_on_its_own(tmp_path, db):
    spec = write_spec(tmp_path, train={"epochs": 200, "inspect_every_s": 0.5}, schedule={"name": "constant"})
    with WorkerClient.run(spec, db=db) as w:
        stream = w.events(timeout=60)
        first = _until(stream, "inspect")[-1]
        second = _until(stream, "inspect")[-1]
        assert w.stop()
        list(stream)
        assert w.wait(60) == 0, w.stderr
    assert second.step > first.step > 0
    assert second.time - first.time >= 0.4
