"""The dashboard's memory plot: allocated, reserved and peak (CUDA) or RSS (CPU) against the run's
predicted peak, a dashed labelled line kept in view."""

from __future__ import annotations

import json

import pytest
from PySide6.QtCore import Qt

from graph_editor.model.serialize import graph_to_dict
from studio.training.dashboard import TrainingDashboard
from studio.training.memory_prediction import predicted_peak
from studio.training.session import TrainingSession
from tests.trainer.memory.test_memory_predict import template
from trainer.checks import load_data
from trainer.memory.doctor import predict_for_spec, resident_data_bytes
from trainer.protocol import events as ev
from trainer.spec import spec_from_dict

pytestmark = pytest.mark.qt
MiB = 2 ** 20


@pytest.fixture
def session(qtbot, tmp_path):
    dash = TrainingDashboard(refresh_ms=0)  # the test drives the ticks
    qtbot.addWidget(dash)
    s = TrainingSession(dash, f"sqlite:///{tmp_path / 'runs.sqlite'}", tmp_path)
    dash.begin_run("run", 100)
    yield s
    s.wait_tasks()


@pytest.mark.slow
def test_predicted_peak_is_the_prediction_of_the_run_spec():
    spec = {"model": {"graph": graph_to_dict(template("digits_cnn"))}, "train": {"batch_size": 32},
            "optim": {"name": "sgd"}}
    rs = spec_from_dict(spec)
    data = resident_data_bytes(rs, load_data(rs, []))          # the digits, kept on the device
    want = predict_for_spec(template("digits_cnn"), rs, device="cpu", resident=data).peak_bytes
    assert data > 0 and predicted_peak(spec, "cpu") == (want, 0)     # fp32: nothing left unmodelled
    assert predicted_peak(spec, "cuda:0")[0] >= want     # blocks rounded up to the allocator's 512 bytes
    with pytest.raises(ValueError, match="model.graph"):
        predicted_peak({"model": {"graph": "missing.graph.json"}}, "cpu")


def test_cuda_samples_plot_allocated_reserved_peak_under_the_predicted_line(qtbot, session):
    dash = session.dashboard
    plot = dash.plots["memory"]
    line = json.dumps({"event": "memory", "step": 10, "device": "cuda:0", "allocated": 300 * MiB,
                       "reserved": 512 * MiB, "peak": 420 * MiB, "active": 310 * MiB, "inactive_split": 3 * MiB,
                       "alloc_retries": 0, "num_ooms": 0, "free": 70_000 * MiB, "total": 80_000 * MiB})
    sample = ev.decode(json.loads(line))
    assert isinstance(sample, ev.Memory) and sample.inactive_split == 3 * MiB
    session.bridge.memory.emit(sample)
    session.bridge.memory.emit(ev.Memory(step=20, device="cuda:0", allocated=310 * MiB, reserved=512 * MiB,
                                         peak=430 * MiB))   # a worker of before: no active/free fields
    dash.set_predicted_peak(2000 * MiB)
    dash.flush(everything=True)
    assert sorted(plot.curve_names()) == ["allocated", "peak", "reserved"]   # counts and free/total: not curves
    assert plot.getPlotItem().titleLabel.text == "Memory (cuda:0)"
    level = plot.level("predicted")
    assert level is not None and level.value() == pytest.approx(2000)
    assert level.label.toPlainText() == "predicted tensors 2000.0 MiB"
    vb = plot.getPlotItem().vb
    vb.autoRange()
    (_, _), (y0, y1) = vb.viewRange()
    assert y0 <= 300 and y1 >= 2000                      # the line far above the curves is in view
    dash.set_predicted_peak(None)
    assert plot.level("predicted") is None


def test_cpu_rss_samples_and_a_flat_curve_keep_the_line_in_view(qtbot, session):
    dash = session.dashboard
    plot = dash.plots["memory"]
    for step in (1, 2, 3):
        session.bridge.memory.emit(ev.Memory(step=step, device="cpu", rss=977 * MiB, peak_rss=977 * MiB))
    dash.set_predicted_peak(6 * MiB)
    dash.flush(everything=True)
    assert sorted(plot.curve_names()) == ["peak_rss", "rss"]
    vb = plot.getPlotItem().vb
    vb.autoRange()
    (_, _), (y0, y1) = vb.viewRange()
    assert y0 <= 6 and y1 >= 977          # a flat RSS no longer pins the y range to +-10% about itself
    dash.set_plot_theme("dark")
    plot.set_plot_theme("dark")
    level = plot.level("predicted")
    assert level.label.color.name() == level.pen.color().name() == plot.theme.curve("#D55E00").lower()
    assert level.pen.style() == Qt.PenStyle.DashLine
    dash.begin_run("next", 10)            # a new run starts without the old run's line
    assert plot.level("predicted") is None


def test_a_run_s_peak_is_not_predicted_again_for_its_plot(qtbot, session):
    """The worker's gate predicted the run (run_started says so): the dashed line is that peak at once,
    and no prediction starts in the studio (wait_tasks has nothing to wait for)."""
    session.spec = {"model": {"graph": "missing.graph.json"}}   # predicting it would fail
    session.bridge.run_started.emit(ev.RunStarted(name="r", device="cuda:0", epochs=1, steps_per_epoch=10,
                                                  predicted_peak=1536 * MiB))
    level = session.dashboard.plots["memory"].level("predicted")
    assert level is not None and level.label.toPlainText() == "predicted tensors 1536.0 MiB"
    assert session.wait_tasks(0)


@pytest.mark.slow
def test_the_predicted_line_says_what_this_cpu_s_bf16_kernels_may_add(qtbot, session, tmp_path):
    """bf16 on a CPU with native bf16 kernels (AVX512-BF16, AMX): oneDNN's buffers are not modelled, and
    the dashed line says how much more they may take, as the memory CLI and the Train dialog say it."""
    from trainer.memory.prediction import native_bf16_cpu

    if not native_bf16_cpu("cpu", "bf16"):
        pytest.skip("this CPU has no native bf16 kernels: nothing is left unmodelled")
    session.spec = {"model": {"graph": graph_to_dict(template("digits_cnn"))}, "train": {"batch_size": 32},
                    "optim": {"name": "sgd"}, "precision": {"dtype": "bf16"}}
    rs = spec_from_dict(session.spec)
    pred = predict_for_spec(template("digits_cnn"), rs, device="cpu",
                            resident=resident_data_bytes(rs, load_data(rs, [])))     # the real predictor
    assert pred.unmodelled_bytes > 0
    plot = session.dashboard.plots["memory"]
    # a run started with no prediction of its own (a script): predicted here, on a thread
    session.bridge.run_started.emit(ev.RunStarted(name="r", device="cpu", epochs=1, steps_per_epoch=10))
    assert session.wait_tasks(120_000)
    qtbot.waitUntil(lambda: plot.level("predicted") is not None, timeout=10_000)
    said = f"up to {pred.unmodelled_bytes / MiB:.1f} MiB more on this CPU's bf16 kernels (not modelled)"
    assert pred.unmodelled_note() == said             # the memory CLI's and the Train dialog's words
    line = plot.level("predicted")
    assert line.label.toPlainText() == (f"predicted tensors {pred.peak_bytes / MiB:.1f} MiB\n"
                                        f"+ up to {pred.unmodelled_bytes / MiB:.1f} MiB: bf16 kernels (not modelled)")
    assert line.label.toolTip() == said                # in full where the label is short
    # the worker's gate predicted it (a budget): run_started carries both figures
    session.bridge.run_started.emit(ev.RunStarted(name="r", device="cpu", epochs=1, steps_per_epoch=10,
                                                  predicted_peak=pred.peak_bytes,
                                                  predicted_unmodelled=pred.unmodelled_bytes))
    assert plot.level("predicted").label.toolTip() == said and "bf16" in plot.level("predicted").label.toPlainText()
    session.dashboard.resize(1280, 700)       # the label fits the memory plot at the narrowest width shipped
    session.dashboard.show()
    session.dashboard.flush(everything=True)
    session.dashboard.grab().save(str(tmp_path / "predicted_bf16.png"))
    session.bridge.run_started.emit(ev.RunStarted(name="r", device="cpu", epochs=1, steps_per_epoch=10,
                                                  predicted_peak=pred.peak_bytes, predicted_unmodelled=0))
    line = plot.level("predicted")
    assert line.label.toPlainText() == f"predicted tensors {pred.peak_bytes / MiB:.1f} MiB" and line.label.toolTip() == ""
