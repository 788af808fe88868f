"""The Runs workspace's comparison parts: the overlaid curves with TensorBoard's controls (EMA smoothing
with the raw curve kept faint, a log-scale y axis, x as step, epoch or wall time, system curves among
the metrics) and a run's tags and notes, edited and saved to the run store. The arithmetic is in
:mod:`.compare`; :class:`~.runs_dock.RunsPanel` places these widgets."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from trainer.metrics import names
from trainer.store.runs import RunStore, StoreError

from .compare import X_AXES, ema, x_values
from .plots import PALETTE, CurvePlot
from .run_history import CURVES, load_curves

RAW_ALPHA = 70          # of 255: the raw curve behind its smoothed one, as TensorBoard draws it
DEFAULT_SMOOTHING = 0.6  # TensorBoard's default


class CompareCurves(QWidget):
    """Metric, smoothing, x axis and log-y controls over one plot of the chosen runs' curves."""

    changed = Signal()   # a control moved: the owner redraws

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.metric_box = QComboBox()   # not "metric": that name is QPaintDevice.metric(), which painting calls
        for key, label in CURVES.items():
            self.metric_box.addItem(label, key)
        self.smoothing = QDoubleSpinBox(minimum=0.0, maximum=0.99, singleStep=0.1, decimals=2,
                                        value=DEFAULT_SMOOTHING)
        self.smoothing.setToolTip("EMA smoothing (0: raw); the raw curve stays faint behind the smoothed one")
        self.x_axis = QComboBox()
        self.x_axis.addItems(list(X_AXES))
        self.log_y = QCheckBox("log y")
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.metric_box, 1)
        for label, widget in (("smoothing", self.smoothing), ("x", self.x_axis)):
            row.addWidget(QLabel(label))
            row.addWidget(widget)
        row.addWidget(self.log_y)
        self.plot = CurvePlot("Selected runs", "", "step")
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addLayout(row)
        lay.addWidget(self.plot, 1)
        self._raw: list[pg.PlotDataItem] = []
        self.metric_box.currentIndexChanged.connect(self.changed)
        self.smoothing.valueChanged.connect(self.changed)
        self.x_axis.currentIndexChanged.connect(self.changed)
        self.log_y.toggled.connect(self._log_toggled)

    def _log_toggled(self, on: bool) -> None:
        self.plot.getPlotItem().setLogMode(y=on)
        self.changed.emit()

    def draw(self, store: RunStore, ids: list[int], name_of: Callable[[int], str]) -> None:
        """Overlay metric ``metric_box`` of runs ``ids``: smoothed, over its raw curve, on the chosen x."""
        key, axis, weight = self.metric_box.currentData(), self.x_axis.currentText(), self.smoothing.value()
        item = self.plot.getPlotItem()
        for raw in self._raw:
            item.removeItem(raw)
        self._raw = []
        self.plot.clear_curves()
        item.setLabel("bottom", "wall time (s)" if axis == "wall time" else axis)
        self.plot.set_title(f"{CURVES[key]} of runs {', '.join(map(str, ids))}" if ids else
                            "Select runs and press Overlay")
        for i, run_id in enumerate(ids):
            steps, ys = load_curves(store, run_id, key)
            xs = x_values(steps, axis, {n: load_curves(store, run_id, n) for n in (names.EPOCH.name, names.TIME.name)}
                          if axis != "step" else {})
            if self.log_y.isChecked():        # a log axis shows positive values only
                keep = ys > 0
                xs, ys = xs[keep], ys[keep]
            color = PALETTE[i % len(PALETTE)]
            smooth = weight > 0 and len(ys) > 2 and not key.startswith("val/")   # per-epoch points stay raw
            if smooth:
                faint = pg.mkColor(self.plot.theme.curve(color))
                faint.setAlpha(RAW_ALPHA)
                self._raw.append(item.plot(xs, ys, pen=pg.mkPen(faint, width=1)))
            name = name_of(run_id)
            self.plot.add_curve(name, color, symbols=key.startswith("val/"))
            self.plot.append(name, xs, ema(ys, weight) if smooth else ys)
        self.plot.refresh()

    def raw_curves(self) -> list[np.ndarray]:
        """The faint raw curves' y values as drawn (for tests and the crosshair's readers)."""
        return [np.asarray(r.yData) for r in self._raw]


class RunNotes(QWidget):
    """A run's tags (comma-separated) and notes, saved to the run store with one click."""

    saved = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.store: RunStore | None = None
        self.run_id: int | None = None
        self.tags = QLineEdit(placeholderText="tags, comma-separated (study:NAME, baseline, ...)")
        self.notes = QPlainTextEdit(placeholderText="Notes on this run")
        self.notes.setMaximumHeight(90)
        self.save = QPushButton("Save Tags && Notes")
        self.save.clicked.connect(self._save)
        self.message = QLabel("")
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.tags)
        lay.addWidget(self.notes)
        row = QHBoxLayout()
        row.addWidget(self.save)
        row.addWidget(self.message, 1)
        lay.addLayout(row)
        self.setEnabled(False)

    def show_run(self, store: RunStore, run_id: int | None, tags: tuple[str, ...] = (), notes: str = "") -> None:
        """Edit run ``run_id`` (None: nothing to edit); an edit in progress on the same run is kept."""
        if run_id == self.run_id and store is self.store:
            return
        self.store, self.run_id = store, run_id
        self.setEnabled(run_id is not None)
        self.tags.setText(", ".join(tags))
        self.notes.setPlainText(notes)
        self.message.setText("")

    def _save(self) -> None:
        if self.store is None or self.run_id is None:
            return
        tags = list(dict.fromkeys(t.strip() for t in self.tags.text().split(",") if t.strip()))
        try:
            self.store.update_run(self.run_id, tags=tags, notes=self.notes.toPlainText())
        except StoreError as exc:
            self.message.setText(f"Not saved: {exc}")
            return
        self.message.setText(f"Saved to run {self.run_id}.")
        self.saved.emit(self.run_id)
