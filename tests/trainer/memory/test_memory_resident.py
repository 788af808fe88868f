"""A dataset the loaders keep on the device counts in the prediction, the worker's gate and the Train dialog's
bar; a streamed one does not."""

from __future__ import annotations

import pytest

from graph_editor.model import load_graph
from graph_editor.model.serialize import graph_to_dict
from tests.trainer.helpers import DIGITS_CNN
from trainer.checks import load_data, setup
from trainer.job import make_loaders
from trainer.memory.doctor import (
    check_run,
    diagnose,
    gate,
    predict_for_spec,
    resident_data_bytes,
    splits_bytes,
)
from trainer.memory.prediction import MemoryPredictionError, largest_batch, predict_memory
from trainer.spec import spec_from_dict

MiB = 2 ** 20


def _spec(**data):
    return spec_from_dict({"model": {"graph": graph_to_dict(load_graph(DIGITS_CNN))}, "device": "cpu",
                           "train": {"batch_size": 64}, "optim": {"name": "sgd"}, "data": {"dataset": "digits", **data}})


@pytest.mark.slow
def test_the_prediction_grows_by_the_resident_bytes_at_every_moment():
    g = load_graph(DIGITS_CNN)
    base = predict_memory(g, 32, "sgd")
    held = predict_memory(g, 32, "sgd", resident=3 * MiB)
    assert held.peak_bytes == base.peak_bytes + 3 * MiB
    assert held.parts["data"] == 3 * MiB and base.parts["data"] == 0
    assert sum(held.parts.values()) == held.peak_bytes
    assert all(p["data"] == 3 * MiB for p in held.phase_peaks.values())
    assert (held.peak_phase, held.peak_node) == (base.peak_phase, base.peak_node)
    assert largest_batch(g, held.peak_bytes - 1, optimizer="sgd", resident=held.peak_bytes)[0] == 0
    for bad in (-1, 1.5, True):
        with pytest.raises(MemoryPredictionError, match="resident"):
            predict_memory(g, 4, resident=bad)


def test_resident_bytes_are_what_the_device_loaders_hold():
    spec = _spec()
    st = setup(spec)
    assert not st.streamed
    loaders = make_loaders(st)
    held = sum(ld.x.numel() * ld.x.element_size() + ld.y.numel() * ld.y.element_size() for ld in loaders.values())
    raw = load_data(spec, [])
    assert resident_data_bytes(spec, raw) == splits_bytes(st.splits) == held > 1797 * 64 * 4
    streamed = _spec(device_budget_mb=0.1)     # the digits' floats are 0.44 MiB: streamed from the host
    assert setup(streamed).streamed and resident_data_bytes(streamed, raw) == 0


@pytest.mark.slow
def test_the_gate_refuses_a_run_that_fits_only_without_its_dataset():
    spec = _spec()
    st = setup(spec)
    data = splits_bytes(st.splits)
    g = st.graph
    step = predict_for_spec(g, spec, channels_last=False).peak_bytes
    spec.memory.budget_mb = (step + data / 2) / MiB          # the step fits, the step and the data do not
    assert check_run(g, spec, device_type="cpu", total=None, channels_last=False) is None
    _, _, diag = gate(st)
    assert diag is not None and diag.prediction.parts["data"] == data
    assert diag.prediction.peak_bytes == step + data
    batch = next(f for f in diag.fixes if f.name == "batch")
    assert batch.fits and batch.changes["train.batch_size"] < 64
    assert not any(f.name == "stream" for f in diag.fixes)   # on the CPU the host holds the data anyway


@pytest.mark.slow
def test_on_cuda_streaming_the_dataset_is_a_fix():
    spec = _spec()
    g = load_graph(DIGITS_CNN)
    pred = predict_for_spec(g, spec, device="cuda", channels_last=True, resident=5 * MiB)
    cuda = diagnose(g, spec, MiB, device="cuda", prediction=pred)     # nothing fits 1 MiB: no batch search
    stream = next(f for f in cuda.fixes if f.name == "stream")
    assert stream.changes == {"data.device_budget_mb": 0} and stream.label.startswith("stream the dataset (5 MiB)")
    assert stream.peak_bytes == pred.peak_bytes - 5 * MiB


@pytest.mark.slow
def test_the_dialog_bar_shows_the_dataset():
    from studio.training.memory_prediction import predict_for_dialog

    g = load_graph(DIGITS_CNN)
    spec = {"model": {"graph": graph_to_dict(g)}, "device": "cpu", "train": {"batch_size": 64},
            "optim": {"name": "sgd"}, "data": {"dataset": "digits"}}
    step = predict_for_spec(g, spec_from_dict(spec), channels_last=False).peak_bytes
    data = splits_bytes(setup(spec_from_dict(spec)).splits)
    spec["memory"] = {"budget_mb": (step + data) * 1.05 / MiB}    # a short search for the largest batch
    figures = predict_for_dialog(g, spec, None, "cpu")
    assert figures.parts["data"] == data and figures.bands()[0] == ("dataset", data, "#999999")
    assert figures.peak == step + data and figures.fits and figures.largest_batch > 64


def test_the_gate_takes_the_studios_prediction_instead_of_predicting_again(monkeypatch):
    """A studio run is predicted once: the Train dialog's peak, compared with the budget; only a run it
    says does not fit is predicted here, for the diagnosis."""
    import trainer.memory.doctor as doctor

    spec = _spec()
    spec.memory.budget_mb = 64
    st = setup(spec)
    real = doctor.judge_run
    calls = []
    monkeypatch.setattr(doctor, "judge_run", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert gate(st, given_peak=4242) == (4242, 0, None) and calls == []
    own = predict_for_spec(st.graph, spec, resident=splits_bytes(st.splits)).peak_bytes
    assert own < 64 * MiB
    # said not to fit: predicted here (a diagnosis needs the prediction), and the worker's own figure decides
    assert gate(st, given_peak=65 * MiB) == (own, 0, None) and calls == [1]
    assert gate(st) == (own, 0, None) and calls == [1, 1]


@pytest.mark.slow
def test_the_gate_reports_what_this_cpu_s_bf16_kernels_may_add():
    """bf16 on a CPU with native bf16 kernels: the gate predicts the run itself (a given peak leaves oneDNN's
    buffers out) and reports their bound beside the peak, for run_started and the dashboard's line."""
    from trainer.memory.prediction import native_bf16_cpu

    spec = _spec()
    spec.memory.budget_mb = 256
    spec.precision.dtype = "bf16"
    st = setup(spec)
    pred = predict_for_spec(st.graph, spec, resident=splits_bytes(st.splits))
    if not native_bf16_cpu("cpu", "bf16"):
        assert gate(st, given_peak=4242) == (4242, 0, None)
        pytest.skip("this CPU has no native bf16 kernels: nothing is left unmodelled")
    assert pred.unmodelled_bytes > 0
    assert gate(st, given_peak=4242) == (pred.peak_bytes, pred.unmodelled_bytes, None)
