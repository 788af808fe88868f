"""The Train dialog: every run-spec field reachable, presets, problems shown before anything starts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PySide6.QtWidgets import QLabel

from graph_editor.model.serialize import load_graph
from studio.training.devices import Device, cpu_device
from studio.training.spec_form import PRESETS, leaf_fields
from studio.training.train_dialog import TrainDialog
from trainer.spec import RunSpec, spec_from_dict

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.qt


def _dialog(qtbot, graph=None, **kw) -> TrainDialog:
    graph = graph or load_graph(ROOT / "assets/templates/digits_cnn.graph.json")
    d = TrainDialog(graph, [Device("cuda:0", "Some GPU", 24576), cpu_device()], **kw)
    qtbot.addWidget(d)
    d.show()
    qtbot.waitUntil(lambda: d.dataset_summary is not None or bool(d.data_error), timeout=60_000)
    return d


def test_every_spec_field_has_an_editor_and_the_spec_round_trips(qtbot):
    d = _dialog(qtbot)
    paths = {p for p, _ in leaf_fields(RunSpec())}
    assert set(d.form.editors) == paths and "optim.betas" in paths and "data.augment.flip" in paths
    d.device.setCurrentIndex(1)
    spec = d.spec()
    parsed = spec_from_dict(spec)
    assert parsed.device == "cpu" and parsed.train.epochs == PRESETS["quick"]["train.epochs"]
    assert isinstance(parsed.model.graph, dict) and parsed.optim.betas == [0.9, 0.999]
    assert d.start_button.isEnabled() and d.problem_list() == []


def test_preview_shows_samples_and_class_counts(qtbot):
    d = _dialog(qtbot)
    assert d.preview_title.text() == "1797 samples of 1 x 8 x 8, 10 classes"
    assert list(d.dataset_view.histogram.counts.items())[:2] == [("0", 178), ("1", 182)]
    assert d.dataset_view.samples_grid.count() == 50  # ten classes: a caption and four samples each


def test_presets_and_advanced_fields(qtbot):
    d = _dialog(qtbot)
    d.apply_preset("accurate")
    spec = spec_from_dict(d.spec())
    assert spec.train.epochs == 30 and spec.optim.label_smoothing == pytest.approx(0.1)
    im = spec.data.images      # images on disk: torchvision's classification recipe
    assert (im.crop_scale, im.auto_augment, im.mixup_alpha, im.cutmix_alpha) == ([0.08, 1.0], "trivialaugment", 0.2, 1.0)
    d.apply_preset("quick")
    im = spec_from_dict(d.spec()).data.images
    assert (im.crop_scale, im.auto_augment, im.mixup_alpha, im.cutmix_alpha) == ([0.5, 1.0], "none", 0.0, 0.0)
    d.apply_preset("accurate")
    spec = spec_from_dict(d.spec())
    d.form.editors["optim.betas"].setText("0.8, 0.99")
    d.form.editors["schedule.name"].setCurrentText("cosine")
    spec = spec_from_dict(d.spec())
    assert spec.optim.betas == [0.8, 0.99] and spec.schedule.name == "cosine"


def test_the_closed_advanced_box_says_what_it_holds(qtbot):
    """Closed, it was an empty frame under the recipe."""
    d = _dialog(qtbot)
    (hint,) = [w for w in d.advanced.findChildren(QLabel) if w.text().startswith("Check the box")]
    assert "early_stopping" in hint.text() and "checkpoints" in hint.text() and not hint.isHidden()
    d.advanced.setChecked(True)
    assert hint.isHidden()


def test_problems_block_the_start(qtbot):
    d = _dialog(qtbot)
    d.form.editors["optim.lr"].setText("fast")
    assert d.problem_list() == ["optim.lr: 'fast' is not a number"] and not d.start_button.isEnabled()
    d.form.editors["optim.lr"].setText("-1")
    assert d.problem_list() == ["optim.lr: must be positive, got -1.0"]
    d.form.editors["optim.lr"].setText("0.001")
    d.form.editors["data.augment.flip"].setChecked(True)
    assert d.start_button.isEnabled()  # digits are images: flip is allowed
    d.form.editors["data.val_fraction"].setText("0.5")
    d.form.editors["data.test_fraction"].setText("0.5")
    assert any("almost nothing to train on" in p for p in d.problem_list())


def test_graph_and_data_disagreeing_is_a_problem(qtbot, tmp_path):
    csv = tmp_path / "three.csv"
    rows = ["a,b,c,label"] + [f"{i},{i % 5},{i % 7},{'xyz'[i % 3]}" for i in range(60)]
    csv.write_text("\n".join(rows) + "\n")
    d = _dialog(qtbot)
    with qtbot.waitSignal(d.preview_read, timeout=60_000):
        d.form.editors["data.dataset"].setText(str(csv))
    assert d.dataset_summary is not None
    assert d.preview_title.text() == "60 samples of 3, 3 classes"
    problems = d.problem_list()  # the trainer's own check_fit, before anything starts
    assert any("10 classes" in p and "has 3" in p for p in problems), problems
    assert any(p.startswith("data.dataset: samples of shape") for p in problems), problems
    assert not d.start_button.isEnabled()


def test_a_dataset_that_cannot_be_read_is_named(qtbot, tmp_path):
    bad = tmp_path / "broken.npz"
    np.savez(bad, nothing=np.zeros(3))
    d = _dialog(qtbot)
    with qtbot.waitSignal(d.preview_read, timeout=60_000):
        d.form.editors["data.dataset"].setText(str(bad))
    assert d.data_error
    assert any(p.startswith("data.dataset:") and "broken.npz" in p for p in d.problem_list())
    assert "Cannot read this dataset" in d.preview_title.text() and not d.start_button.isEnabled()


def test_a_folder_split_ahead_of_time_is_previewed_with_its_splits(qtbot, tmp_path):
    from PIL import Image

    for split, n in (("train", 4), ("val", 2), ("test", 3)):
        for c, name in enumerate(("dark", "light")):
            (tmp_path / split / name).mkdir(parents=True)
            for i in range(n):
                Image.new("L", (8, 8), 60 + 120 * c + i).save(tmp_path / split / name / f"{i}.png")
    d = _dialog(qtbot)
    with qtbot.waitSignal(d.preview_read, timeout=60_000):
        d.form.editors["data.dataset"].setText(str(tmp_path))
    assert d.dataset_summary is not None
    d.grab().save(str(tmp_path / "dialog.png"))
    assert d.preview_title.text() == "8 samples of 1 x 8 x 8, 2 classes; its own val split (4) and test split (6) kept"
    assert d.dataset_view.histogram.counts == {"dark": 4, "light": 4}
    fractions = d.form.editors["data.val_fraction"], d.form.editors["data.test_fraction"]
    assert not any(f.isEnabled() for f in fractions) and "own val split" in fractions[0].toolTip()
    d.form.editors["data.dataset"].setText("digits")
    qtbot.waitUntil(lambda: d.preview_title.text().startswith("1797 samples"), timeout=60_000)
    assert all(f.isEnabled() for f in fractions)


def test_the_preset_box_says_custom_once_a_value_differs(qtbot):
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    d = _dialog(qtbot)
    assert d.preset.currentText() == "quick"
    epochs = d.form.editors["train.epochs"]
    QTest.mouseClick(epochs, Qt.MouseButton.LeftButton)
    QTest.keyClick(epochs, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    QTest.keyClicks(epochs, "7")
    QTest.keyClick(epochs, Qt.Key.Key_Return)
    assert d.preset.currentText() == "custom"
    QTest.keyClick(epochs, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    QTest.keyClicks(epochs, str(PRESETS["quick"]["train.epochs"]))
    QTest.keyClick(epochs, Qt.Key.Key_Return)
    assert d.preset.currentText() == "quick"                   # back to the preset's values
    d.apply_preset("accurate")
    assert d.preset.currentText() == "accurate"


def test_a_flat_input_takes_the_digits_flattened_as_the_worker_does(qtbot):
    """The mlp template (input 64) on the 8x8 digits: the worker flattens the images, so the dialog
    must not refuse it ('samples of shape 1x8x8 do not fit the graph's input 64')."""
    d = _dialog(qtbot, load_graph(ROOT / "assets/templates/mlp.graph.json"))
    assert d.problem_list() == [] and d.start_button.isEnabled()


def test_closing_while_the_preview_still_reads_waits_for_every_read(qtbot, tmp_path, monkeypatch):
    """A dataset edit starts a new read while the first still runs; closing the dialog then must
    wait for both (a QThread destroyed while running aborts the whole studio). The reads here are a
    slow disk: each holds until the test lets the disk answer, half a second after the close began."""
    import threading

    from studio.training import train_dialog

    real = train_dialog.dataset_read.read_summary
    started, ended, disk = [], [], threading.Event()

    def slow(*args):
        started.append(args[0])
        disk.wait(30)
        try:
            return real(*args)
        finally:
            ended.append(args[0])

    monkeypatch.setattr(train_dialog.dataset_read, "read_summary", slow)
    graph = load_graph(ROOT / "assets/templates/digits_cnn.graph.json")
    d = TrainDialog(graph, [cpu_device()])
    qtbot.addWidget(d)
    d.show()
    d.form.editors["data.dataset"].setText(str(tmp_path / "elsewhere.npz"))  # a second, superseding read
    qtbot.waitUntil(lambda: len(started) == 2, timeout=5000)  # after the edit's 300 ms debounce
    assert ended == []                                        # both wait on the disk
    threading.Timer(0.5, disk.set).start()
    d.reject()
    assert sorted(ended) == sorted(started)                   # the close waited for both reads


def test_a_pretrained_start_is_typed_as_names_and_blocks(qtbot):
    """model.frozen, reinit and lr_scale are lists of names ('conv1..relu2', 'conv3=0.1'), not numbers."""
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    d = _dialog(qtbot)
    d.advanced.setChecked(True)
    for path, text in (("model.frozen", "conv1..relu2"), ("model.reinit", "fc"), ("model.lr_scale", "conv3=0.1")):
        editor = d.form.editors[path]
        QTest.mouseClick(editor, Qt.MouseButton.LeftButton)
        QTest.keyClicks(editor, text)
        QTest.keyClick(editor, Qt.Key.Key_Return)
    model = spec_from_dict(d.spec()).model
    assert (model.frozen, model.reinit, model.lr_scale) == (["conv1..relu2"], ["fc"], ["conv3=0.1"])
