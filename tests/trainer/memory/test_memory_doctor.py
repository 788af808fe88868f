"""The OOM doctor and the run spec's memory section: refusal figures, fixes with their peaks, one-click apply."""

from __future__ import annotations

import pytest

from graph_editor.model import load_graph
from tests.trainer.helpers import DIGITS_CNN, ROOT, kinds, run_worker, tiny_cnn, write_spec
from trainer.checks import load_data
from trainer.memory.doctor import (
    apply_fix,
    check_run,
    checkpoint_blocks,
    predict_for_spec,
    resident_data_bytes,
)
from trainer.spec import RunSpec, SpecError, spec_from_dict

pytestmark = pytest.mark.process
MLP = ROOT / "assets" / "templates" / "mlp.graph.json"


def digits_spec(batch: int = 256) -> RunSpec:
    spec = RunSpec()
    spec.train.batch_size = batch
    return spec


def test_a_run_that_fits_or_has_no_budget_passes():
    g = load_graph(DIGITS_CNN)
    spec = digits_spec()
    assert check_run(g, spec, device_type="cpu", total=None, channels_last=False) is None
    spec.memory.budget_mb = 1024
    assert check_run(g, spec, device_type="cpu", total=None, channels_last=False) is None


def test_too_big_is_diagnosed_with_fixes_each_with_its_peak():
    g = load_graph(DIGITS_CNN)
    spec = digits_spec(256)
    need = predict_for_spec(g, spec, channels_last=False).peak_bytes
    spec.memory.budget_mb = need * 0.6 / 2 ** 20
    d = check_run(g, spec, device_type="cpu", total=None, channels_last=False)
    assert d is not None and not d.fits and d.prediction.peak_bytes == need
    names = [f.name for f in d.fixes]
    assert names[:1] == ["batch"] and {"bf16", "channels_last", "sgd"} <= set(names)
    batch = d.fixes[0]
    n = batch.changes["train.batch_size"]
    assert 1 <= n < 256 and batch.fits and batch.peak_bytes <= d.budget
    assert predict_for_spec(g, digits_spec(n + 1), channels_last=False).peak_bytes > d.budget
    assert all(f.peak_bytes < need for f in d.fixes if f.name in ("bf16", "sgd"))
    assert d.holders() and all(node in g.nodes for node, _ in d.holders())
    lines = d.problems()
    assert lines[0].startswith("train.batch_size: predicted peak") and f"batch {n}" in lines[1]
    fixed = spec_from_dict(apply_fix(spec.to_dict(), batch))
    assert fixed.train.batch_size == n and fixed.memory.budget_mb == spec.memory.budget_mb


def test_checkpointing_fix_uses_the_graphs_blocks():
    g = load_graph(DIGITS_CNN.parent / "resnet18_cifar.graph.json")
    blocks = checkpoint_blocks(g)
    assert "g_layer1" in blocks and "g_layer4" in blocks
    spec = digits_spec(8)
    plain = predict_for_spec(g, spec, channels_last=False)
    ck = predict_for_spec(g, spec_from_dict(apply_fix(spec.to_dict(), {"changes": {"memory.checkpoint": blocks}})),
                          channels_last=False)
    assert ck.checkpoint == blocks and ck.parts["activations"] < plain.parts["activations"] / 2


def test_memory_section_of_the_spec_is_checked():
    spec = spec_from_dict({"memory": {"checkpoint": ["g_layer1", "conv1..relu"], "budget_mb": 512}})
    assert spec.memory.checkpoint == ["g_layer1", "conv1..relu"] and spec.to_dict()["memory"]["budget_mb"] == 512
    with pytest.raises(SpecError, match="memory.checkpoint: expected a list of group ids"):
        spec_from_dict({"memory": {"checkpoint": "g_layer1"}})
    with pytest.raises(SpecError, match="memory.budget_mb: must not be negative"):
        spec_from_dict({"memory": {"budget_mb": -1}})


def test_worker_trains_with_checkpointing_and_refuses_a_bad_segment(tmp_path, db):
    code, events, _ = run_worker(write_spec(tmp_path, tiny_cnn(), memory={"checkpoint": ["conv..pool"]}), db)
    assert code == 0 and kinds(events)[-1] == "finished"
    bad = tmp_path / "bad"
    bad.mkdir()
    code, events, _ = run_worker(write_spec(bad, tiny_cnn(), memory={"checkpoint": ["pool..conv"]}), db)
    assert code == 2 and events[-1].kind == "spec"
    assert "memory.checkpoint[0]: 'pool' comes after 'conv' in the graph" in events[-1].message


def test_worker_refuses_a_run_predicted_not_to_fit_before_it_starts(tmp_path, db):
    g = tiny_cnn()
    spec = digits_spec(64)
    data = resident_data_bytes(spec, load_data(spec, []))       # the digits, kept on the device
    need = predict_for_spec(g, spec, channels_last=True, resident=data).peak_bytes
    budget_mb = need * 0.6 / 2 ** 20
    code, events, err = run_worker(write_spec(tmp_path, g, memory={"budget_mb": budget_mb}), db)
    assert code == 2 and kinds(events) == ["failed"], kinds(events)
    failed = events[0]
    assert failed.kind == "oom" and failed.run_id is None and "predicted peak" in failed.message
    assert failed.problems[0].startswith("train.batch_size: predicted peak")
    fixes = failed.diagnosis["fixes"]
    batch = next(f for f in fixes if f["name"] == "batch")
    assert batch["fits"] and 1 <= batch["changes"]["train.batch_size"] < 64
    assert failed.diagnosis["prediction"]["peak_bytes"] == need
    assert "out of memory" in err


def test_worker_refuses_a_batch_norm_mlp_over_budget_with_the_fixes_not_a_valueerror(tmp_path, db):
    """The mlp template (BatchNorm1d) over a budget: the largest-batch search starts at batch 2, so the
    refusal is "out of memory" with its fixes (it was "cannot start the run: ValueError")."""
    g = load_graph(MLP)
    spec = digits_spec(64)
    data = resident_data_bytes(spec, load_data(spec, []))
    need = predict_for_spec(g, spec, resident=data).peak_bytes
    code, events, err = run_worker(write_spec(tmp_path, MLP, memory={"budget_mb": need * 0.9 / 2 ** 20}), db)
    assert code == 2 and kinds(events) == ["failed"], err
    failed = events[0]
    assert failed.kind == "oom" and "ValueError" not in failed.message, failed.message
    batch = next(f for f in failed.diagnosis["fixes"] if f["name"] == "batch")
    assert batch["fits"] and 2 <= batch["changes"]["train.batch_size"] < 64


def test_a_batch_of_one_into_batch_norm_is_a_spec_problem():
    spec = digits_spec(1)
    spec.memory.budget_mb = 1024
    with pytest.raises(SpecError, match=r"train.batch_size: batch 1: node bn1 \(BatchNorm1d\) normalises over the batch"):
        check_run(load_graph(MLP), spec, device_type="cpu", total=None, channels_last=False)


def test_channels_last_is_one_rule_for_the_run_its_prediction_and_the_doctor():
    """A graph that reshapes a flat input into an image has convolutions but takes no images: the worker
    keeps it NCHW, and so does the prediction (the dialog's bar, the dashboard's line, the gate, the
    sweeps). A convnet on images goes channels_last everywhere."""
    from graph_editor.model import Graph, InputSpec
    from trainer.checks import channels_last, setup

    flat = Graph(InputSpec((64,)), 10, {"name": "flat conv"})
    flat.chain(("Input", "input"), ("Reshape", "to_image", {"shape": [1, 8, 8]}),
               ("Conv2d", "conv", {"out_channels": 4, "kernel_size": 3}), ("Flatten", "flatten"),
               ("Linear", "fc", {"out_features": 10}), ("Output", "output"))
    spec = digits_spec(batch=8)
    assert not channels_last(spec, flat) and not predict_for_spec(flat, spec).channels_last
    st = setup(spec_from_dict({"model": {"graph": str(DIGITS_CNN)}, "data": {"dataset": "digits"},
                               "train": {"batch_size": 8}}))
    assert st.channels_last and channels_last(st.spec, st.graph) and predict_for_spec(st.graph, st.spec).channels_last
