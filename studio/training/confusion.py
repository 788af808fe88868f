"""Confusion-matrix heatmap, per-class precision/recall/F1, and the samples behind a cell.

:func:`per_class_metrics` gives the table's rows from the per-class figures the worker sent (or, for a
matrix the studio made itself, :func:`trainer.metrics.per_class.per_class` of it; tested without Qt).
:class:`ConfusionMatrixView` paints the matrix with its counts and class labels and emits
``cell_clicked(true, predicted)``; :class:`SampleGallery` shows the validation samples that fell
in that cell with their true and predicted labels. Both take the studio's light or dark colours
through ``set_plot_theme`` (see :mod:`studio.training.plot_theme`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from PySide6.QtCore import QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QImage, QMouseEvent, QPainter, QPaintEvent, QPixmap, QResizeEvent
from PySide6.QtWidgets import (
    QGridLayout,
    QHeaderView,
    QLabel,
    QScrollArea,
    QSizePolicy,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from trainer.metrics.per_class import per_class
from trainer.protocol.events import PerClass

from .plot_theme import LIGHT, PlotTheme, plot_theme


@dataclass(frozen=True)
class ClassMetrics:
    """Precision, recall and F1 of one class, and its support (true samples)."""

    name: str
    precision: float
    recall: float
    f1: float
    support: int


def per_class_metrics(matrix: np.ndarray, names: Sequence[str], figures: PerClass | None = None,
                      ) -> list[ClassMetrics]:
    """One row per class: ``figures`` as the worker sent them, else computed from ``matrix`` (rows
    true classes, columns predicted) by :func:`trainer.metrics.per_class.per_class`."""
    pc = figures if figures is not None else per_class(matrix)
    return [ClassMetrics(str(names[i]) if i < len(names) else str(i), float(pc.precision[i]),
                         float(pc.recall[i]), float(pc.f1[i]), int(pc.support[i])) for i in range(len(pc))]


def cell_indices(true: np.ndarray, predicted: np.ndarray, t: int, p: int) -> np.ndarray:
    """Positions of the samples whose true class is ``t`` and predicted class ``p``."""
    return np.flatnonzero((np.asarray(true) == t) & (np.asarray(predicted) == p))


WAITING = "The confusion matrix appears\nafter the first epoch"


class ConfusionMatrixView(QWidget):
    """A painted heatmap: rows are true classes, columns predicted, each cell with its count.

    The diagonal is shaded green, errors red, both by their share of the row, so a weak
    class stands out whatever its size. Clicking a cell emits ``cell_clicked(true, pred)``.
    """

    cell_clicked = Signal(int, int)

    _MARGIN_LEFT = 46
    _MARGIN_TOP = 40

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._matrix = np.zeros((0, 0), dtype=np.int64)
        self._names: list[str] = []
        self._selected: tuple[int, int] | None = None
        self.empty_text = WAITING    # what the view says while it has no matrix
        self.theme = LIGHT
        self.setMinimumSize(QSize(260, 260))
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.setMouseTracking(True)

    def set_matrix(self, matrix: np.ndarray, names: Sequence[str]) -> None:
        self._matrix = np.asarray(matrix, dtype=np.int64)
        self._names = [str(n) for n in names]
        if self._selected and max(self._selected) >= len(self._matrix):
            self._selected = None
        self.update()

    def matrix(self) -> np.ndarray:
        return self._matrix

    def set_plot_theme(self, theme: str | PlotTheme) -> None:
        """Repaint in the light or dark colours."""
        self.theme = plot_theme(theme)
        self.update()

    def select(self, cell: tuple[int, int] | None) -> None:
        self._selected = cell
        self.update()

    def _grid(self) -> tuple[float, float, float]:
        """Left, top and cell size of the (square, horizontally centred) grid."""
        n = max(len(self._matrix), 1)
        room_w = self.width() - self._MARGIN_LEFT - 6
        side = max(min(room_w, self.height() - self._MARGIN_TOP - 6), 10)
        return self._MARGIN_LEFT + max(room_w - side, 0) / 2, self._MARGIN_TOP, side / n

    def cell_at(self, x: float, y: float) -> tuple[int, int] | None:
        """The (true, predicted) cell under widget point (x, y), or None."""
        n = len(self._matrix)
        x0, y0, cell = self._grid()
        col, row = int((x - x0) // cell), int((y - y0) // cell)
        if n == 0 or x < x0 or y < y0 or not (0 <= row < n and 0 <= col < n):
            return None
        return row, col

    def cell_rect(self, t: int, p: int) -> QRectF:
        """Where the cell of true class ``t`` and predicted class ``p`` is drawn, in widget coordinates."""
        x0, y0, cell = self._grid()
        return QRectF(x0 + p * cell, y0 + t * cell, cell, cell)

    def cell_center(self, t: int, p: int) -> tuple[float, float]:
        centre = self.cell_rect(t, p).center()
        return centre.x(), centre.y()

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802 (Qt override)
        hit = self.cell_at(event.position().x(), event.position().y())
        if hit is not None:
            self._selected = hit
            self.update()
            self.cell_clicked.emit(*hit)

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 (Qt override)
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        theme = self.theme
        p.fillRect(self.rect(), QColor(theme.background))
        n = len(self._matrix)
        if n == 0:
            p.setPen(QColor(theme.muted))
            p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, self.empty_text)
            return
        x0, y0, cell = self._grid()
        rows = self._matrix.sum(axis=1, keepdims=True).clip(min=1)
        share = self._matrix / rows
        font = QFont()
        font.setPointSizeF(max(6.0, min(10.0, cell / 3.2)))
        p.setFont(font)
        empty, border = QColor(theme.cell), QColor(theme.cell_border)
        right, wrong, floor = QColor(theme.right), QColor(theme.wrong), theme.shade_floor
        strong, pale = QColor("white"), QColor(theme.count_on_pale)
        for t in range(n):
            for q in range(n):
                r = QRectF(x0 + q * cell, y0 + t * cell, cell, cell)
                s = float(share[t, q])
                color = QColor(right if t == q else wrong)
                color.setAlphaF(floor + (1 - floor) * s if self._matrix[t, q] else 0.0)
                p.fillRect(r, empty)
                p.fillRect(r, color)
                p.setPen(border)
                p.drawRect(r)
                if self._matrix[t, q]:
                    p.setPen(strong if s > 0.55 else pale)
                    p.drawText(r, Qt.AlignmentFlag.AlignCenter, str(int(self._matrix[t, q])))
        if self._selected is not None:
            t, q = self._selected
            p.setPen(QColor(theme.selected))
            p.drawRect(QRectF(x0 + q * cell + 1, y0 + t * cell + 1, cell - 2, cell - 2))
        self._paint_labels(p, n, x0, y0, cell)

    def _paint_labels(self, p: QPainter, n: int, x0: float, y0: float, cell: float) -> None:
        p.setPen(QColor(self.theme.text))
        for i in range(n):
            name = self._names[i] if i < len(self._names) else str(i)
            p.drawText(QRectF(x0 - 40, y0 + i * cell, 36, cell),
                       Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, name)
            p.drawText(QRectF(x0 + i * cell, y0 - 18, cell, 16), Qt.AlignmentFlag.AlignCenter, name)
        small = QFont()
        small.setPointSizeF(8)
        small.setItalic(True)
        p.setFont(small)
        p.setPen(QColor(self.theme.muted))
        p.drawText(QRectF(x0, 0, n * cell, 18), Qt.AlignmentFlag.AlignCenter, "predicted \u2192")
        p.save()
        p.translate(x0 - 36, y0 + n * cell / 2)
        p.rotate(-90)
        p.drawText(QRectF(-n * cell / 2, -8, n * cell, 16), Qt.AlignmentFlag.AlignCenter, "true \u2192")
        p.restore()


def image_to_pixmap(image: np.ndarray, size: int = 64) -> QPixmap:
    """A sample (H, W), (1, H, W) or (3, H, W) array, stretched to 0..255, as a pixmap ``size`` wide. A
    flat sample has nothing to stretch: uint8 shows its own level, other types a middle grey."""
    src = np.asarray(image)
    a = src.astype(np.float32)
    if a.ndim == 3 and a.shape[0] in (1, 3):
        a = np.moveaxis(a, 0, -1)
    if a.ndim == 3 and a.shape[-1] == 1:
        a = a[..., 0]
    if a.ndim == 1:  # tabular: show the feature vector as one row
        a = a[None, :]
    lo, hi = float(a.min()), float(a.max())
    if hi > lo:
        a8 = np.ascontiguousarray(((a - lo) / (hi - lo) * 255).astype(np.uint8))
    else:
        a8 = np.full(a.shape, src.flat[0] if src.dtype == np.uint8 else 127, dtype=np.uint8)
    if a8.ndim == 2:
        img = QImage(a8.data, a8.shape[1], a8.shape[0], a8.strides[0], QImage.Format.Format_Grayscale8)
    else:
        img = QImage(a8.data, a8.shape[1], a8.shape[0], a8.strides[0], QImage.Format.Format_RGB888)
    return QPixmap.fromImage(img.copy()).scaled(size, size, Qt.AspectRatioMode.KeepAspectRatio,
                                                Qt.TransformationMode.FastTransformation)


class SampleGallery(QScrollArea):
    """Thumbnails of samples, each captioned with its true and predicted label."""

    MAX_SHOWN = 60

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWidgetResizable(True)
        self._body = QWidget()
        outer = QVBoxLayout(self._body)
        outer.setContentsMargins(4, 4, 4, 4)
        self._title = QLabel("Click a cell of the matrix to see its samples.")
        self._title.setWordWrap(True)
        outer.addWidget(self._title)
        self._grid = QGridLayout()
        self._grid.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        outer.addLayout(self._grid)
        outer.addStretch(1)
        self.setWidget(self._body)
        self._shown: list[int] = []
        self._tiles: list[QWidget] = []
        self._cols = 0
        self._misses: list[QLabel] = []  # captions of wrong predictions, coloured by the theme
        self.theme = LIGHT

    def set_plot_theme(self, theme: str | PlotTheme) -> None:
        """Recolour the captions of wrong predictions (the rest follows the application palette)."""
        self.theme = plot_theme(theme)
        for caption in self._misses:
            caption.setStyleSheet(self._caption_style(True))

    def _caption_style(self, miss: bool) -> str:
        return "font-size: 8pt;" + (f"color: {self.theme.miss};" if miss else "")

    def shown_indices(self) -> list[int]:
        return list(self._shown)

    def title(self) -> str:
        return self._title.text()

    def show_message(self, text: str) -> None:
        self._clear()
        self._title.setText(text)

    def show_samples(self, title: str, images: Sequence[np.ndarray], indices: Sequence[int],
                     true_names: Sequence[str], pred_names: Sequence[str]) -> None:
        """Show up to MAX_SHOWN samples; ``indices`` are their positions in the validation split."""
        self._clear()
        total = len(indices)
        extra = f" (first {self.MAX_SHOWN} shown)" if total > self.MAX_SHOWN else ""
        self._title.setText(f"{title}: {total} sample{'s' if total != 1 else ''}{extra}")
        for k, (img, idx, tn, pn) in enumerate(zip(images, indices, true_names, pred_names, strict=False)):
            if k >= self.MAX_SHOWN:
                break
            tile = QWidget()
            lay = QVBoxLayout(tile)
            lay.setContentsMargins(2, 2, 2, 2)
            lay.setSpacing(1)
            pic = QLabel()
            pic.setPixmap(image_to_pixmap(img))
            pic.setAlignment(Qt.AlignmentFlag.AlignCenter)
            cap = QLabel(f"#{idx}\ntrue {tn}\npred {pn}")
            cap.setAlignment(Qt.AlignmentFlag.AlignCenter)
            cap.setStyleSheet(self._caption_style(tn != pn))
            if tn != pn:
                self._misses.append(cap)
            lay.addWidget(pic)
            lay.addWidget(cap)
            self._tiles.append(tile)
            self._shown.append(int(idx))
        self._flow()

    def _columns(self) -> int:
        """As many tiles side by side as the gallery's width takes (six did not fit a 1280 px window)."""
        tile = max((t.sizeHint().width() for t in self._tiles), default=72) + self._grid.horizontalSpacing()
        return max(1, (self.viewport().width() - 12) // max(tile, 1))

    def _flow(self) -> None:
        cols = self._cols = self._columns()
        for k, tile in enumerate(self._tiles):
            self._grid.addWidget(tile, k // cols, k % cols)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        if self._tiles and self._columns() != self._cols:
            for tile in self._tiles:
                self._grid.removeWidget(tile)
            self._flow()

    def _clear(self) -> None:
        while self._grid.count():
            item = self._grid.takeAt(0)
            widget = item.widget() if item is not None else None
            if widget:
                widget.deleteLater()
        self._shown = []
        self._tiles = []
        self._misses = []


class ConfusionPanel(QWidget):
    """The matrix, the per-class table and the gallery of the clicked cell, stacked.

    Predictions (the validation images with their true and predicted labels) arrive apart from
    the matrix, through :meth:`set_predictions`; until they do, a click emits
    ``samples_requested(true, pred)`` so the owner can compute them, and the gallery says so. A
    matrix set after them (the next epoch's) makes them stale: the gallery keeps what it shows,
    titled with where its samples come from, and the next click asks again.
    """

    samples_requested = Signal(int, int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        self.caption = QLabel("Confusion matrix")
        self.caption.setStyleSheet("font-weight: 600;")
        self.matrix_view = ConfusionMatrixView()
        self.metrics = QTableWidget(0, 5)
        self.metrics.setHorizontalHeaderLabels(["class", "precision", "recall", "F1", "support"])
        self.metrics.verticalHeader().setVisible(False)
        self.metrics.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.metrics.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.gallery = SampleGallery()
        split = self.split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.matrix_view)
        split.addWidget(self.metrics)
        split.addWidget(self.gallery)
        split.setChildrenCollapsible(False)
        split.setSizes([460, 240, 300])  # proportions: the gallery needs room for a row of samples
        lay.addWidget(self.caption)
        lay.addWidget(split, 1)
        self._names: list[str] = []
        self._pred: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._pred_source = ""      # e.g. "last checkpoint, epoch 9"
        self._stale = False         # a newer matrix came after the predictions
        self.matrix_view.cell_clicked.connect(self.show_cell)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        """Stacked where the panel is tall (the Train dashboard), side by side where it is wide and short
        (the Runs tab): stacked there, the three did not fit their least sizes and the splitter laid the
        table and its grip over the matrix's last rows."""
        super().resizeEvent(event)
        wide = self.width() > 1.6 * self.height()
        want = Qt.Orientation.Horizontal if wide else Qt.Orientation.Vertical
        if self.split.orientation() != want:
            self.split.setOrientation(want)
            self.split.setSizes([450, 300, 450] if wide else [460, 240, 300])

    def clear(self) -> None:
        self.matrix_view.empty_text = WAITING
        self.matrix_view.set_matrix(np.zeros((0, 0)), [])
        self.metrics.setRowCount(0)
        self._pred, self._pred_source, self._stale = None, "", False
        self.caption.setText("Confusion matrix")
        self.gallery.show_message("Click a cell of the matrix to see its samples.")

    def set_matrix(self, matrix: np.ndarray, names: Sequence[str], caption: str = "",
                   per_class: PerClass | None = None) -> None:
        """Show ``matrix`` with its per-class table: ``per_class`` as the worker sent it, when it did."""
        names = [str(n) for n in names] or [str(i) for i in range(len(matrix))]
        self._names = names
        self.matrix_view.set_matrix(matrix, names)
        self._stale = self._pred is not None
        self.caption.setText(f"Confusion matrix (validation{', ' + caption if caption else ''})")
        rows = per_class_metrics(matrix, names, per_class)
        self.metrics.setRowCount(len(rows))
        for i, r in enumerate(rows):
            for j, text in enumerate((r.name, f"{r.precision:.3f}", f"{r.recall:.3f}", f"{r.f1:.3f}",
                                      str(r.support))):
                item = QTableWidgetItem(text)
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.metrics.setItem(i, j, item)

    def set_predictions(self, images: np.ndarray, true: np.ndarray, pred: np.ndarray, source: str = "") -> None:
        """The validation samples behind the matrix (``source`` says whose predictions they are);
        clicking a cell then shows them at once."""
        self._pred = (np.asarray(images), np.asarray(true), np.asarray(pred))
        self._pred_source, self._stale = source, False

    def none_coming(self, why: str) -> None:
        """The run ended without a matrix: say why where the matrix would be (not "appears after the
        first epoch", which a run retrained on train+val said for good)."""
        if len(self.matrix_view.matrix()) == 0:
            self.matrix_view.empty_text = why
            self.matrix_view.update()
            self.gallery.show_message("")

    def show_message(self, text: str) -> None:
        """Say, where the samples of a cell appear, why there are none (yet)."""
        self.gallery.show_message(text)

    def show_predictions(self, result: Any, source: str, t: int, p: int, *, matrix: bool = True) -> None:
        """A checkpoint's re-evaluation (:class:`~trainer.metrics.confusion_cells.Predictions`): its matrix and
        per-class figures, its samples, and cell (t, p) of it. ``matrix`` False: a newer matrix is shown (the
        next epoch's came meanwhile); it stays, and the gallery shows the cell's samples titled with their
        checkpoint, stale as the next click finds them."""
        if matrix:
            self.set_matrix(result.matrix(), result.classes, source, per_class=result.per_class())
        self.set_predictions(result.images, result.true, result.pred, source)
        self.show_cell(t, p)
        self._stale = not matrix

    def show_cell(self, t: int, p: int) -> None:
        self.matrix_view.select((t, p))
        name = self._name
        if self._pred is None or self._stale:
            self.gallery.show_message(f"Loading the samples of true {name(t)}, predicted {name(p)}...")
            self.samples_requested.emit(t, p)
            return
        images, true, pred = self._pred
        idx = cell_indices(true, pred, t, p)
        source = f" ({self._pred_source})" if self._pred_source else ""
        self.gallery.show_samples(f"true {name(t)}, predicted {name(p)}{source}", images[idx[: SampleGallery.MAX_SHOWN]],
                                  idx.tolist(), [name(t)] * len(idx), [name(p)] * len(idx))

    def _name(self, i: int) -> str:
        return self._names[i] if i < len(self._names) else str(i)
