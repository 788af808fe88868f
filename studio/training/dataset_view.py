"""The Train dialog's dataset view: samples per class, the class histogram, bad files, augmentation.

It shows a summary read by :mod:`.dataset_read` (off the GUI thread) and reads more only when asked:
another draw of the augmentation preview decodes one file, "Check every file" decodes them all in
the background (stoppable; the dialog waits for it on close).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
from PySide6.QtCore import QRectF, QSize, Qt, QTimer
from PySide6.QtGui import QColor, QPainter, QPaintEvent, QPalette
from PySide6.QtWidgets import (
    QComboBox,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from .confusion import image_to_pixmap
from .tasks import BackgroundTask

THUMB = 56
AUG_VIEWS = 6
AUG_THUMB = 72


class ClassHistogram(QWidget):
    """One horizontal bar per class, its count at the end; the smallest class is drawn in the warning colour."""

    ROW = 18

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.counts: dict[str, int] = {}
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def set_counts(self, counts: dict[str, int]) -> None:
        self.counts = dict(counts)
        self.setFixedHeight(max(1, len(counts)) * self.ROW + 8)
        self.update()

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        return QSize(300, max(1, len(self.counts)) * self.ROW + 8)

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 - Qt's name
        if not self.counts:
            return
        p = QPainter(self)
        pal = self.palette()
        label_w = min(140, max(p.fontMetrics().horizontalAdvance(c) for c in self.counts) + 10)
        top = max(self.counts.values()) or 1
        low = min(self.counts.values())
        bar_w = max(10, self.width() - label_w - 70)
        for i, (name, n) in enumerate(self.counts.items()):
            y = 4 + i * self.ROW
            p.setPen(pal.color(QPalette.ColorRole.WindowText))
            p.drawText(QRectF(0, y, label_w - 6, self.ROW), Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
                       p.fontMetrics().elidedText(name, Qt.TextElideMode.ElideMiddle, label_w - 6))
            w = bar_w * n / top
            colour = QColor("#d9822b") if n == low and low < top else pal.color(QPalette.ColorRole.Highlight)
            p.fillRect(QRectF(label_w, y + 3, max(w, 1), self.ROW - 6), colour)
            p.drawText(QRectF(label_w + w + 4, y, 66, self.ROW), Qt.AlignmentFlag.AlignVCenter, f"{n:,}")
        p.end()


class DatasetView(QTabWidget):
    """Tabs over one dataset summary. ``image_spec()`` gives the run's current ``data.images`` fields
    (a dict), for the augmentation preview."""

    def __init__(self, image_spec: Callable[[], dict[str, Any]], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._image_spec = image_spec
        self._summary: dict[str, Any] | None = None
        self._tasks: list[BackgroundTask] = []
        self._aug_asked = 0     # augmentation draws asked for (the shown one is the last)
        self._stop = threading.Event()
        self._draw = 0
        self.addTab(self._samples_tab(), "Samples")
        self.addTab(self._classes_tab(), "Classes")
        self.bad_tab = self._bad_tab()
        self.addTab(self.bad_tab, "Bad files")
        self.augment_tab = self._augment_tab()
        self.addTab(self.augment_tab, "Augmentation")
        self._redraw_timer = QTimer(self, singleShot=True, interval=300)
        self._redraw_timer.timeout.connect(self.redraw_augmentation)
        self.currentChanged.connect(lambda _i: self.spec_changed())

    def spec_changed(self) -> None:
        """The run's fields changed: the augmentation preview follows them (once the typing pauses)
        while it is the tab shown."""
        if self.currentWidget() is self.augment_tab:
            self._redraw_timer.start()

    # ------------------------------------------------------------------ tabs
    def _samples_tab(self) -> QScrollArea:
        inner = QWidget()
        self.samples_grid = QGridLayout(inner)
        self.samples_grid.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.samples_grid.setHorizontalSpacing(4)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(inner)
        return scroll

    def _classes_tab(self) -> QScrollArea:
        self.histogram = ClassHistogram()
        inner = QWidget()
        lay = QVBoxLayout(inner)
        lay.addWidget(self.histogram)
        lay.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(inner)
        return scroll

    def _bad_tab(self) -> QWidget:
        box = QWidget()
        lay = QVBoxLayout(box)
        self.bad_note = QLabel("")
        self.bad_note.setWordWrap(True)
        lay.addWidget(self.bad_note)
        self.bad_list = QListWidget()
        lay.addWidget(self.bad_list, 1)
        row = QHBoxLayout()
        self.check_button = QPushButton("Check every file")
        self.check_button.setToolTip("Decode every image as the run will (in the background): the files it would skip")
        self.check_button.clicked.connect(self.check_every_file)
        row.addWidget(self.check_button)
        row.addStretch(1)
        lay.addLayout(row)
        return box

    def _augment_tab(self) -> QWidget:
        box = QWidget()
        lay = QVBoxLayout(box)
        row = QHBoxLayout()
        row.addWidget(QLabel("sample"))
        self.aug_sample = QComboBox()
        self.aug_sample.currentIndexChanged.connect(lambda _i: self.redraw_augmentation())
        row.addWidget(self.aug_sample, 1)
        self.aug_button = QPushButton("Another draw")
        self.aug_button.clicked.connect(self.another_draw)
        row.addWidget(self.aug_button)
        lay.addLayout(row)
        self.aug_note = QLabel("")
        self.aug_note.setWordWrap(True)
        lay.addWidget(self.aug_note)
        self.aug_grid = QGridLayout()
        self.aug_grid.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        lay.addLayout(self.aug_grid)
        lay.addStretch(1)
        return box

    # ----------------------------------------------------------------- state
    def show_summary(self, summary: dict[str, Any]) -> None:
        self._summary = summary
        self._fill_samples(summary)
        self.histogram.set_counts(summary["counts"])
        self._fill_bad(summary)
        disk = summary.get("disk")
        self.setTabEnabled(self.indexOf(self.augment_tab), disk is not None)
        self.aug_sample.blockSignals(True)
        self.aug_sample.clear()
        for name, shown in summary["samples"].items():
            for file, _ in shown:
                self.aug_sample.addItem(f"{name}: {file}", file)
        self.aug_sample.blockSignals(False)
        self.spec_changed()

    def clear_summary(self) -> None:
        """Show nothing (the dataset cannot be read); the tabs stay."""
        self._summary = None
        _empty(self.samples_grid)
        _empty(self.aug_grid)
        self.histogram.set_counts({})
        self.bad_list.clear()
        self.bad_note.setText("")
        self.aug_sample.clear()

    def _fill_samples(self, summary: dict[str, Any]) -> None:
        _empty(self.samples_grid)
        for row, (name, shown) in enumerate(summary["samples"].items()):
            cap = QLabel(f"{name}\n{summary['counts'].get(name, 0):,}")
            cap.setToolTip(f"class {name}: {summary['counts'].get(name, 0):,} samples")
            self.samples_grid.addWidget(cap, row, 0)
            for col, (file, img) in enumerate(shown, start=1):
                cell = QLabel()
                cell.setPixmap(image_to_pixmap(img, THUMB))
                cell.setToolTip(f"{name}: {file}")
                self.samples_grid.addWidget(cell, row, col)
        hidden = len(summary["counts"]) - len(summary["samples"])
        if hidden > 0:
            more = QLabel(f"... and {hidden} more classes (counted under Classes)")
            self.samples_grid.addWidget(more, len(summary["samples"]), 0, 1, 6)

    def _fill_bad(self, summary: dict[str, Any], checked: bool = False) -> None:
        self.bad_list.clear()
        for line in summary["problems"]:
            self.bad_list.addItem(line)
        for file, why in summary["bad"]:
            self.bad_list.addItem(f"{file}: {why}")
        disk = summary.get("disk")
        self.check_button.setVisible(disk is not None)
        if disk is None:
            self.bad_note.setText("Read whole into memory: a file that cannot be read stops the preview with its reason.")
            return
        n = len(summary["bad"])
        scope = f"all {summary['size'] + sum(summary.get('own_splits', {}).values()):,} files" if checked else \
            f"the {disk['read']} files shown"
        self.bad_note.setText(f"{n} of {scope} cannot be read; the run skips such files and counts them."
                              if n else f"Every one of {scope} reads; the run skips and counts any that do not.")
        self.setTabText(self.indexOf(self.bad_tab), f"Bad files ({n})" if n else "Bad files")

    # ----------------------------------------------------------- background
    def _run(self, fn: Callable[[], Any], done: Callable[[Any], None], error: Callable[[str], None]) -> None:
        task = BackgroundTask(fn, self)
        summary = self._summary
        task.done.connect(lambda r: done(r) if self._summary is summary else None)
        task.error.connect(lambda m: error(m) if self._summary is summary else None)
        self._tasks = [t for t in self._tasks if t.is_running()] + [task.start()]

    def check_every_file(self) -> None:
        disk = (self._summary or {}).get("disk")
        if not disk:
            return
        self.check_button.setEnabled(False)
        self.bad_note.setText("Checking every file...")
        stop, root, channels = self._stop, disk["root"], disk["channels"]

        def check() -> list[tuple[str, str]]:
            from pathlib import Path

            from trainer.data.images.index import index_images
            from trainer.data.images.preview import check_files

            return check_files(index_images(Path(root)), channels, stop=stop.is_set)

        def done(bad: list[tuple[str, str]]) -> None:
            assert self._summary is not None
            self._summary["bad"] = bad
            self.check_button.setEnabled(True)
            self._fill_bad(self._summary, checked=True)

        def failed(message: str) -> None:
            self.bad_note.setText(f"Cannot check: {message}")
            self.check_button.setEnabled(True)

        self._run(check, done, failed)

    def another_draw(self) -> None:
        self._draw += 1
        self.redraw_augmentation()

    def redraw_augmentation(self) -> None:
        """The run's train transform, as the spec now sets it, drawn on the chosen sample."""
        disk = (self._summary or {}).get("disk")
        file = self.aug_sample.currentData()
        if not disk or not file:
            _empty(self.aug_grid)
            self.aug_note.setText("Images read from disk are augmented per sample (data.images); "
                                  "this dataset is not." if self._summary else "")
            return
        from pathlib import Path

        path, channels, size, seed, fields = Path(disk["root"]) / file, disk["channels"], disk["size"], self._draw, \
            dict(self._image_spec())

        def draw() -> list[np.ndarray]:
            from trainer.data.images.preview import augmented_views
            from trainer.spec import ImageSpec

            known = {k: v for k, v in fields.items() if k in ImageSpec.__dataclass_fields__}
            return augmented_views(path, channels, size, ImageSpec(**known), AUG_VIEWS, seed)

        self._aug_asked += 1      # two draws in flight may end in either order: the last asked is shown
        asked = self._aug_asked
        self._run(draw, lambda views: self._show_views(views) if asked == self._aug_asked else None,
                  lambda m: self.aug_note.setText(f"Cannot augment: {m}") if asked == self._aug_asked else None)

    def _show_views(self, views: list[np.ndarray]) -> None:
        _empty(self.aug_grid)
        for i, img in enumerate(views):
            cell = QLabel()
            cell.setPixmap(image_to_pixmap(img, AUG_THUMB))
            self.aug_grid.addWidget(cell, 0, i)      # one row: the tab is short in the dialog
        im = self._image_spec()
        self.aug_note.setText(f"{AUG_VIEWS} draws of the train transform: crop scale {im.get('crop_scale')}, "
                              f"flip {im.get('hflip')}, auto augment {im.get('auto_augment')}")

    def stop(self) -> None:
        """End the background reads (a full check stops at its next file) and wait for them."""
        self._redraw_timer.stop()
        self._stop.set()
        for task in self._tasks:
            task.wait()
        self._tasks = []
        self._stop = threading.Event()

    def wait(self, ms: int = 30_000) -> bool:
        """Wait for every background read (tests)."""
        return all(t.wait(ms) for t in list(self._tasks))


def _empty(grid: QGridLayout) -> None:
    while grid.count():
        item = grid.takeAt(0)
        w = item.widget() if item is not None else None
        if w is not None:
            w.hide()                  # at once: deleteLater leaves it painted until the loop turns
            w.deleteLater()
