"""The predicted memory of a run as a stacked bar against the device's memory, with the OOM doctor's fixes.

:class:`MemoryBar` paints weights / gradients / optimizer state / saved activations / transient
against a line at what the device leaves for training; :class:`MemoryPanel` adds the figures,
"largest batch that fits: N" and, for a run predicted not to fit, one button per fix (each with its
predicted peak) that sets the fix's fields on the run spec. The prediction itself is
:mod:`studio.training.memory_prediction` (no widgets), run off the GUI thread.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QPainter, QPen
from PySide6.QtWidgets import QGridLayout, QGroupBox, QLabel, QPushButton, QSizePolicy, QVBoxLayout, QWidget

from graph_editor.model.units import nbytes

from .memory_prediction import SEARCH_LIMIT, MemoryFigures

MIN_BAND = 3.0   # pixels: the narrowest a band with any bytes is drawn


class MemoryBar(QWidget):
    """A horizontal stacked bar of the predicted peak's parts, with a line at the capacity."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.figures: MemoryFigures | None = None
        self.setMinimumHeight(28)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def sizeHint(self) -> QSize:
        return QSize(360, 28)

    def set_figures(self, figures: MemoryFigures | None) -> None:
        self.figures = figures
        self.setToolTip(self._tooltip())
        self.update()

    def scale(self) -> float:
        """Bytes across the bar: the capacity (and a little room past it), or the peak when it is over
        the capacity or there is none. 7 MiB of a 23.5 GiB budget is a sliver, as it is: scaled to
        the peak it was drawn nearly full. The bar writes "peak of capacity" beside the sliver."""
        f = self.figures
        assert f is not None
        return max(f.peak, f.capacity or 0, 1) * 1.04

    def band_rects(self) -> list[tuple[str, QRectF]]:
        """Where each band is drawn (tests click and read these); a band too small to see at the
        bar's scale is drawn MIN_BAND pixels wide."""
        f = self.figures
        if f is None:
            return []
        scale = self.scale()
        w, x, out = self.width() - 2, 1.0, []
        for label, value, _ in f.bands():
            dx = max(w * value / scale, MIN_BAND if value > 0 else 0.0)
            out.append((label, QRectF(x, 2, dx, self.height() - 4)))
            x += dx
        return out

    def paintEvent(self, _event: Any) -> None:  # noqa: N802 - Qt's name
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        pal = self.palette()
        p.fillRect(self.rect(), pal.base())
        p.setPen(QPen(pal.mid().color()))
        p.drawRect(self.rect().adjusted(0, 0, -1, -1))
        f = self.figures
        if f is None:
            p.end()
            return
        colours = {label: colour for label, _, colour in f.bands()}
        for label, rect in self.band_rects():
            p.fillRect(rect, QColor(colours[label]))
        if f.capacity and f.capacity <= self.scale():
            x = 1 + (self.width() - 2) * f.capacity / self.scale()
            p.setPen(QPen(QColor("#D55E00") if not f.fits else pal.text().color(), 2))
            p.drawLine(int(x), 0, int(x), self.height())
        rects = self.band_rects()
        end = rects[-1][1].right() if rects else 1.0
        if f.capacity and end < self.width() * 0.6:   # the figures beside a sliver, where there is room
            p.setPen(QPen(pal.text().color()))
            p.drawText(QRectF(end + 6, 0, self.width() - end - 12, self.height()),
                       int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter),
                       f"{nbytes(f.peak)} of {nbytes(f.capacity)}")
        p.end()

    def _tooltip(self) -> str:
        f = self.figures
        if f is None:
            return ""
        return "\n".join(f"{label}: {nbytes(v)}" for label, v, _ in f.bands())


class MemoryPanel(QGroupBox):
    """The bar, its legend, the verdict and the doctor's fixes; ``apply_fix(changes)`` on a fix's click."""

    apply_fix = Signal(dict)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Memory (predicted peak of a training step)", parent)
        lay = QVBoxLayout(self)
        self.bar = MemoryBar()
        lay.addWidget(self.bar)
        self.legend = QLabel("")
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self.legend.setWordWrap(True)
        lay.addWidget(self.legend)
        self.verdict = QLabel("")
        self.verdict.setWordWrap(True)
        lay.addWidget(self.verdict)
        self.fix_row = QGridLayout()
        lay.addLayout(self.fix_row)
        self.fix_buttons: list[QPushButton] = []

    def set_busy(self, text: str = "Predicting...") -> None:
        self.verdict.setText(text)

    def set_error(self, message: str) -> None:
        self.bar.set_figures(None)
        self.legend.setText("")
        self.verdict.setText(f"No prediction: {message}")
        self._set_fixes([])

    def set_figures(self, f: MemoryFigures) -> None:
        self.bar.set_figures(f)
        self.legend.setText("&nbsp;&nbsp;".join(
            f"<span style='color:{c}'>&#9632;</span> {label} {nbytes(v)}" for label, v, c in f.bands()))
        where = f" (in the {f.phase}{', at ' + f.node if f.node and not f.node.startswith('(') else ''})" \
            if f.phase else ""
        text = f"Peak {nbytes(f.peak)} at batch {f.batch}{where}"
        if f.unmodelled_note:
            text += f", and {f.unmodelled_note}"
        if f.capacity:
            text += f", {f.peak / f.capacity:.1%} of the {nbytes(f.capacity)} {f.capacity_label}"
        if f.largest_batch is not None:
            at_least = "at least " if f.largest_batch >= SEARCH_LIMIT else ""
            text += f". Largest batch that fits: {at_least}{f.largest_batch}" if f.largest_batch else \
                ". Not even batch 1 fits"
        if not f.fits:
            text = "Does not fit. " + text + ". Fixes, each with its predicted peak:"
        self.verdict.setText(text + ("" if not f.fits else "."))
        self._set_fixes(f.fixes if not f.fits else [])

    def _set_fixes(self, fixes: list[dict[str, Any]]) -> None:
        for b in self.fix_buttons:
            self.fix_row.removeWidget(b)
            b.hide()
            b.deleteLater()
        self.fix_buttons = []
        for fix in fixes:
            b = QPushButton(f"{fix['label']}: {nbytes(fix['peak_bytes'])}" + ("" if fix["fits"] else " (too big)"))
            b.setToolTip("Set " + ", ".join(f"{k} = {v}" for k, v in fix["changes"].items()))
            b.clicked.connect(lambda _c=False, ch=dict(fix["changes"]): self.apply_fix.emit(ch))
            self.fix_row.addWidget(b, len(self.fix_buttons) // 2, len(self.fix_buttons) % 2)
            self.fix_buttons.append(b)
