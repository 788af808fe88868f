"""The Train dialog's memory bar: the predicted peak against the device, refusal, one-click fixes."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from graph_editor.model.serialize import load_graph
from studio.training.devices import cpu_device
from studio.training.memory_bar import MemoryPanel
from studio.training.memory_prediction import MemoryFigures
from studio.training.train_dialog import TrainDialog

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.qt


def _dialog(qtbot) -> TrainDialog:
    d = TrainDialog(load_graph(ROOT / "assets/templates/digits_cnn.graph.json"), [cpu_device()])
    qtbot.addWidget(d)
    d.show()
    qtbot.waitUntil(lambda: d.dataset_summary is not None or bool(d.data_error), timeout=60_000)
    return d


def _predicted(qtbot, d: TrainDialog) -> MemoryFigures:
    qtbot.waitUntil(lambda: d.wait_memory() and d.predicted_peak() is not None, timeout=120_000)
    shown = d.memory.bar.figures              # what the panel draws: the prediction of the spec as it is
    assert shown is not None and shown.peak == d.predicted_peak()
    return shown


@pytest.mark.slow
def test_bar_fills_with_the_parts_and_the_largest_batch(qtbot, tmp_path):
    d = _dialog(qtbot)
    f = _predicted(qtbot, d)
    assert f.fits and f.batch == 64 and f.peak == sum(f.parts.values())
    assert f.largest_batch and f.largest_batch > 64
    rects = dict(d.memory.bar.band_rects())
    assert list(rects) == ["dataset", "weights", "grads", "optimizer", "activations", "transient"]
    assert rects["dataset"].width() > 0                 # the digits live on the device during the run
    assert rects["activations"].width() > 0 and rects["optimizer"].width() > 0
    assert "Largest batch that fits: " in d.memory.verdict.text()
    assert d.start_button.isEnabled() and not d.memory.fix_buttons
    d.memory.grab().save(str(tmp_path / "memory_panel.png"))


@pytest.mark.slow
def test_a_run_that_does_not_fit_is_refused_and_a_fix_click_makes_it_fit(qtbot):
    d = _dialog(qtbot)
    _predicted(qtbot, d)
    d.advanced.setChecked(True)
    budget = d.form.editors["memory.budget_mb"]
    budget.selectAll()
    QTest.keyClicks(budget, "4")                      # 4 MiB: digits_cnn at batch 64 needs about 7
    f = _predicted(qtbot, d)
    assert not f.fits and f.capacity == 4 * 2 ** 20
    assert any("does not fit" in line for line in d.problem_list()) and not d.start_button.isEnabled()
    labels = [b.text() for b in d.memory.fix_buttons]
    assert labels[0].startswith("batch ") and any(t.startswith("bf16") for t in labels)
    n = f.fixes[0]["changes"]["train.batch_size"]
    QTest.mouseClick(d.memory.fix_buttons[0], Qt.MouseButton.LeftButton)
    assert d.form.value("train.batch_size") == n
    f = _predicted(qtbot, d)
    assert f.fits and f.batch == n and d.start_button.isEnabled()


def test_panel_renders_a_refusal(qtbot, tmp_path):
    panel = MemoryPanel()
    qtbot.addWidget(panel)
    panel.resize(760, 160)
    fixes = [{"name": "batch", "label": "batch 20 (the largest that fits)", "changes": {"train.batch_size": 20},
              "peak_bytes": 248 * 2 ** 20, "fits": True},
             {"name": "sgd", "label": "SGD with momentum instead of adamw", "changes": {"optim.name": "sgd"},
              "peak_bytes": 398 * 2 ** 20, "fits": False}]
    panel.set_figures(MemoryFigures(440 * 2 ** 20, {"weights": 43 * 2 ** 20, "gradients": 32 * 2 ** 20,
                                                     "optimizer": 85 * 2 ** 20, "activations": 270 * 2 ** 20,
                                                     "batch": 2 ** 20, "transient": 9 * 2 ** 20},
                                    250 * 2 ** 20, "memory.budget_mb", 64, 20, "backward", "layer1_0_conv1", fixes))
    panel.show()
    assert panel.verdict.text().startswith("Does not fit.") and len(panel.fix_buttons) == 2
    seen = []
    panel.apply_fix.connect(seen.append)
    QTest.mouseClick(panel.fix_buttons[1], Qt.MouseButton.LeftButton)
    assert seen == [{"optim.name": "sgd"}]
    panel.grab().save(str(tmp_path / "refusal.png"))


@pytest.mark.slow
def test_a_batch_larger_than_the_train_split_is_refused_with_that_reason(qtbot):
    """Not 'does not fit': a batch of 100,000 digits is refused as the worker refuses it."""
    d = _dialog(qtbot)
    _predicted(qtbot, d)
    batch = d.form.editors["train.batch_size"]
    batch.selectAll()
    QTest.keyClicks(batch, "100000")
    _predicted(qtbot, d)
    problems = d.problem_list()
    assert problems == ["train.batch_size: 100000 is larger than the train split (1258 samples)"], problems
    assert not d.start_button.isEnabled()


@pytest.mark.slow
def test_the_dialog_s_bf16_kernels_bytes_reach_the_run_it_starts(qtbot, controller, monkeypatch):
    """bf16 on this CPU's native bf16 kernels: the dialog's prediction leaves oneDNN's buffers out and says so;
    Start hands that bound to the session with the peak (the dashboard's line says it), not only the peak."""
    from trainer.memory.prediction import native_bf16_cpu

    if not native_bf16_cpu("cpu", "bf16"):
        pytest.skip("this CPU has no native bf16 kernels: nothing is left unmodelled")
    started: list[tuple] = []
    # not the worker here; no pid: the fixture kills the process group of a pid it is given, and killpg(1) is kill(-1)
    monkeypatch.setattr(controller.session, "start", lambda *a: started.append(a) or 0)
    d = controller.open_train_dialog()
    assert d is not None
    qtbot.waitUntil(lambda: d.dataset_summary is not None, timeout=60_000)
    combo = d.form.editors["precision.dtype"]
    combo.setFocus()
    QTest.keyClicks(combo, "bf16")
    assert combo.currentText() == "bf16"
    f = _predicted(qtbot, d)
    assert f.unmodelled > 0 and d.predicted_unmodelled() == f.unmodelled
    assert "more on this CPU's bf16 kernels (not modelled)" in d.memory.verdict.text()
    QTest.mouseClick(d.start_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: bool(started), timeout=10_000)
    spec, peak, unmodelled = started[0]
    assert spec["precision"]["dtype"] == "bf16" and (peak, unmodelled) == (f.peak, f.unmodelled)
