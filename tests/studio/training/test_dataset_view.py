"""The Train dialog's dataset view on an image folder read from disk: the class histogram and samples
from the index and a few decoded files (never the folder whole), the bad files with their reasons, and
the run's own augmentation on a real sample, driven by clicks."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from pytestqt.exceptions import TimeoutError as WaitTimeout

from graph_editor.model.serialize import load_graph
from studio.training.devices import cpu_device
from studio.training.train_dialog import TrainDialog
from tests.trainer.image_files import corrupt, write_folder

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.qt


def _dialog(qtbot, folder: Path) -> TrainDialog:
    graph = load_graph(ROOT / "assets/templates/resnet18_cifar.graph.json")   # what a user trains on images
    graph.num_classes = 3
    graph.set_param("fc", "out_features", 3)
    d = TrainDialog(graph, [cpu_device()])
    qtbot.addWidget(d)
    d.show()
    d.form.editors["train.batch_size"].setValue(8)
    d.form.editors["data.dataset"].setText(str(folder))
    qtbot.waitUntil(lambda: d.dataset_summary is not None and d.dataset_summary.get("disk") is not None, timeout=60_000)
    return d


def _click_tab(qtbot, view, title: str) -> None:
    bar = view.tabBar()
    index = next(i for i in range(view.count()) if view.tabText(i).startswith(title))
    QTest.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.tabRect(index).center())
    assert view.currentIndex() == index


@pytest.mark.slow
def test_an_image_folder_is_shown_from_its_index_and_a_few_decoded_files(qtbot, tmp_path, monkeypatch):
    import trainer.data

    files = write_folder(tmp_path / "pets", classes=3, per_class=12, size=(40, 40))
    # A read of the whole folder (load_raw) would decode every image: the view must not need it.
    real = trainer.data.load_raw

    def load_raw(dataset, *args, **kw):
        assert "pets" not in str(dataset), "the folder was read whole"
        return real(dataset, *args, **kw)

    monkeypatch.setattr(trainer.data, "load_raw", load_raw)
    d = _dialog(qtbot, tmp_path / "pets")
    view = d.dataset_view
    assert d.preview_title.text() == "36 samples of 3 x 32 x 32, 3 classes"
    assert view.histogram.counts == {"c0": 12, "c1": 12, "c2": 12}
    assert d.dataset_summary["disk"]["read"] == 12                   # four samples of each class, nothing else
    assert view.samples_grid.count() == 3 * 5                 # a caption and four thumbnails per class
    from studio.training.memory_prediction import resident_bytes
    from trainer.spec import spec_from_dict

    assert resident_bytes(spec_from_dict(d.spec())) == 0           # the memory bar's dataset: streamed, not read whole
    assert d.problem_list() == [] and len(files) == 36
    d.grab().save(str(tmp_path / "dataset_view.png"))


@pytest.mark.slow
def test_bad_files_are_listed_with_their_reasons_and_every_file_can_be_checked(qtbot, tmp_path):
    files = write_folder(tmp_path / "pets", classes=3, per_class=6)
    for f in files[:6]:          # every c0 sample is shown (4 of 6) or not: two of the shown are broken
        corrupt(f)
    d = _dialog(qtbot, tmp_path / "pets")
    view = d.dataset_view
    _click_tab(qtbot, view, "Bad files")
    shown_bad = view.bad_list.count()
    assert shown_bad == 4 and view.tabText(view.currentIndex()) == "Bad files (4)"
    assert all(line.startswith("c0/") and ": " in line for line in
               (view.bad_list.item(i).text() for i in range(view.bad_list.count())))
    assert "of the 12 files shown cannot be read" in view.bad_note.text()
    QTest.mouseClick(view.check_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: view.check_button.isEnabled() and view.bad_list.count() == 6, timeout=30_000)
    assert "6 of all 18 files cannot be read" in view.bad_note.text()
    assert d.problem_list() == []                             # skipped and counted by the run, not fatal


@pytest.mark.slow
def test_the_augmentation_preview_draws_the_spec_s_train_transform_on_a_real_sample(qtbot, tmp_path):
    write_folder(tmp_path / "pets", classes=3, per_class=4, size=(48, 48))
    d = _dialog(qtbot, tmp_path / "pets")
    view = d.dataset_view
    _click_tab(qtbot, view, "Augmentation")
    qtbot.waitUntil(lambda: view.aug_grid.count() == 6, timeout=30_000)

    def pixels() -> list[bytes]:
        return [view.aug_grid.itemAt(i).widget().pixmap().toImage().bits().tobytes() for i in range(6)]

    first = pixels()
    assert len(set(first)) > 1                                 # six random draws
    QTest.mouseClick(view.aug_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: view.aug_grid.count() == 6 and pixels() != first, timeout=30_000)
    # The spec's fields drive it: no crop, no flip gives six identical centre crops.
    d.form.editors["data.images.crop_scale"].setText("")
    d.form.editors["data.images.hflip"].setText("0")
    # 60 s: CI timed this wait out once at 30 s beside the other worker's distributed runs (cause unknown;
    # the note says what the grid showed then)
    try:
        qtbot.waitUntil(lambda: view.aug_grid.count() == 6 and len(set(pixels())) == 1, timeout=60_000)
    except WaitTimeout as exc:
        raise AssertionError(f"{view.aug_grid.count()} views, {len(set(pixels()))} distinct; "
                             f"note: {view.aug_note.text()!r}") from exc
    assert "flip 0" in view.aug_note.text()
    d.grab().save(str(tmp_path / "augmentation.png"))
