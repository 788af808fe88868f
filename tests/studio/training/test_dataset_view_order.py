"""The augmentation preview shows the last draw asked for, whichever draw ends last: a draw asked for
earlier that finishes after a newer one is forced here (its draw blocks until the test releases it)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtTest import QTest

from studio.training.dataset_read import read_summary
from studio.training.dataset_view import DatasetView
from tests.trainer.image_files import write_folder

pytestmark = pytest.mark.qt
SIZE = (32, 32)


def _barrier(qtbot) -> None:
    """Every event posted so far has been delivered (a queued call posted now runs after them)."""
    seen: list[int] = []
    QTimer.singleShot(0, lambda: seen.append(1))
    qtbot.waitUntil(lambda: seen == [1], timeout=10_000)


def _colours(view: DatasetView) -> set[int]:
    """The first pixel's red of every thumbnail shown."""
    return {view.aug_grid.itemAt(i).widget().pixmap().toImage().pixelColor(0, 0).red()
            for i in range(view.aug_grid.count())}


def test_an_older_draw_that_ends_after_a_newer_one_does_not_replace_it(qtbot, tmp_path, monkeypatch):
    import trainer.data.images.preview as preview

    write_folder(tmp_path / "pets", classes=2, per_class=3, size=SIZE)
    spec = {"data": {"dataset": str(tmp_path / "pets"), "format": "auto", "image_size": list(SIZE)}}
    summary = read_summary(str(tmp_path / "pets"), "auto", "", list(SIZE), spec, (3, *SIZE))
    assert summary.get("disk") is not None
    release, started = threading.Event(), threading.Event()

    def draw(file, channels, size, im, n=6, seed=0):
        """Draw 0 (the first asked) waits for the test; draw 1 ends at once. Each is one flat colour."""
        if seed == 0:
            started.set()
            release.wait(30)             # a deadline: the test releases it, or it gives up
        return [np.full((channels, *size), 10 + 200 * seed, dtype=np.uint8) for _ in range(n)]

    monkeypatch.setattr(preview, "augmented_views", draw)
    view = DatasetView(lambda: {"hflip": 0.5})
    qtbot.addWidget(view)
    view.show()
    try:
        view.show_summary(summary)
        bar = view.tabBar()
        QTest.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.tabRect(view.indexOf(view.augment_tab)).center())
        qtbot.waitUntil(started.is_set, timeout=30_000)             # draw 0 runs (after the typing pause), held
        QTest.mouseClick(view.aug_button, Qt.MouseButton.LeftButton)    # "Another draw": draw 1
        qtbot.waitUntil(lambda: view.aug_grid.count() == 6, timeout=30_000)
        assert _colours(view) == {210}
    finally:
        release.set()
    assert view.wait(30_000)                 # draw 0 has ended after draw 1 ...
    _barrier(qtbot)                          # ... and its result has reached the view
    assert view.aug_grid.count() == 6 and _colours(view) == {210}    # the newer draw stays
    assert "flip 0.5" in view.aug_note.text()
