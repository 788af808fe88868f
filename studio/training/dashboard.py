"""The live training dashboard: plots, progress with ETA, "Compiling...", run controls, epochs.

The dashboard never redraws per event. Event handlers only append to Python lists (cheap);
a 25 Hz timer moves the pending points into the plots' NumPy buffers and redraws one plot whose
data changed (round robin), so a worker streaming thousands of events a second costs at most 25
plot redraws a second, one per turn of the event loop.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QStandardItem, QStandardItemModel
from PySide6.QtWidgets import (
    QDoubleSpinBox,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QProgressBar,
    QPushButton,
    QSplitter,
    QTableView,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from graph_editor.model.units import MiB
from trainer.metrics import names
from trainer.protocol import events as ev

from ..elided_label import ElidedLabel
from ..widgets import fit_columns_to_row
from .confusion import ConfusionPanel
from .memory_prediction import predicted_line_texts
from .memory_timeline import MemoryTimelineView
from .plot_theme import LIGHT, PlotTheme, plot_theme
from .plots import CurvePlot

REFRESH_MS = 40  # one plot redrawn per tick: each of five plots ~5 times a second

# plot key -> (title, y label, legend corner); curves are created on first use. The legend sits
# where the curves usually are not: losses fall to the bottom right, accuracy rises to the top right.
PLOTS = {
    "loss": ("Loss", "cross-entropy", "top"),
    "accuracy": ("Accuracy", "fraction correct", "bottom"),
    "lr": ("Learning rate", "lr", "bottom"),
    "throughput": ("Throughput", "samples / s", "bottom"),
    "memory": ("Memory", "MiB", "bottom"),
}

# What the memory plot's lines measure: a CPU worker's RSS is the whole process, far above the step's tensors.
MEMORY_TIP = ("rss / peak_rss: everything the worker process holds (Python, torch's libraries, the dataset, "
              "allocator caches), about a GB before the first tensor.\n"
              "Dashed, predicted: the peak of the tensors one training step holds (weights, gradients, optimizer "
              "state, activations), what a GPU would have to hold; on CUDA the plot shows allocated and "
              "reserved, which compare with it directly.")

EPOCH_COLUMNS = ("epoch", "train\nloss", "train\nacc", "val\nloss", "val\nacc", "lr", "time\n(s)")  # narrow columns


def format_duration(seconds: float) -> str:
    """``1:02:03`` / ``2:03`` / ``5 s``: a short human duration."""
    s = max(0, int(round(seconds)))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    if h:
        return f"{h}:{m:02d}:{sec:02d}"
    return f"{m}:{sec:02d}" if m else f"{sec} s"


class ProgressClock:
    """Steps done over total steps, and an ETA from the rate since the first step after compile.
    Time spent paused does not count: the ETA stands still while paused and goes on from there."""

    def __init__(self) -> None:
        self.total = 0
        self.done = 0
        self._t0: float | None = None
        self._step0 = 0
        self._paused_at: float | None = None
        self._paused_for = 0.0

    def start(self, total: int) -> None:
        self.total, self.done, self._t0, self._step0 = max(total, 0), 0, None, 0
        self._paused_at, self._paused_for = None, 0.0

    def update(self, done: int, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        if self._t0 is None:
            self._t0, self._step0 = now, done
        self.done = done

    @property
    def paused(self) -> bool:
        """Whether the clock stands still (the run is paused: its ETA is frozen)."""
        return self._paused_at is not None

    def pause(self, now: float | None = None) -> None:
        if self._paused_at is None:
            self._paused_at = time.monotonic() if now is None else now

    def resume(self, now: float | None = None) -> None:
        if self._paused_at is not None:
            now = time.monotonic() if now is None else now
            if self._t0 is not None:
                self._paused_for += max(now - max(self._paused_at, self._t0), 0.0)
            self._paused_at = None

    def eta(self, now: float | None = None) -> float | None:
        now = time.monotonic() if now is None else now
        if self._paused_at is not None:
            now = self._paused_at          # frozen while paused
        if self._t0 is None or self.done <= self._step0 or self.total <= 0:
            return None
        rate = (self.done - self._step0) / max(now - self._t0 - self._paused_for, 1e-9)
        return max(self.total - self.done, 0) / rate


class TrainingDashboard(QWidget):
    """Plots, progress, controls, epoch table and confusion matrix of the current run.

    Feed it through ``begin_run``, ``add_metrics``, ``add_memory``, ``end_epoch``,
    ``compile_started``/``compile_done`` and ``set_state`` (the bridge's signals are connected to
    these by :class:`~studio.training.session.TrainingSession`). The control buttons emit intents.
    """

    pause_requested = Signal()
    resume_requested = Signal()
    stop_requested = Signal()
    lr_requested = Signal(float)
    record_memory_requested = Signal()
    memory_trace_shown = Signal(str)   # a recording asked for has arrived and is drawn (its error, "" if none)

    def __init__(self, parent: QWidget | None = None, *, refresh_ms: int = REFRESH_MS) -> None:
        """``refresh_ms``: how often buffered points are drawn (one plot a tick); 0 draws them only when
        :meth:`flush` is called (whoever owns the dashboard drives the ticks)."""
        super().__init__(parent)
        self.plots: dict[str, CurvePlot] = {k: CurvePlot(t, y, legend=c) for k, (t, y, c) in PLOTS.items()}
        self._pending: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
        self._stale: list[str] = []  # plots with undrawn points, oldest first
        self.clock = ProgressClock()
        self._compile_t0: float | None = None
        self._compile_kind = ""                  # "first time" (cold caches), "cached" or unknown
        self._compile_expected: float | None = None
        self._compile_stage = ""                 # the graph being compiled, from compile_progress
        self._paused = False
        self._build()
        self._timer = QTimer(self)
        self._timer.setInterval(refresh_ms)
        self._timer.timeout.connect(self.flush)
        if refresh_ms > 0:
            self._timer.start()

    # ------------------------------------------------------------------ layout
    def _build(self) -> None:
        root = QVBoxLayout(self)
        root.setContentsMargins(6, 6, 6, 6)
        root.addLayout(self._header())
        split = QSplitter(Qt.Orientation.Horizontal)
        left = QWidget()
        grid = QGridLayout(left)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setSpacing(6)
        for i, key in enumerate(PLOTS):
            grid.addWidget(self.plots[key], i // 2, i % 2)
        self.plots["memory"].setToolTip(MEMORY_TIP)
        self.epochs = QStandardItemModel(0, len(EPOCH_COLUMNS), self)
        self.epochs.setHorizontalHeaderLabels(list(EPOCH_COLUMNS))
        self.epoch_table = QTableView()
        self.epoch_table.setModel(self.epochs)
        self.epoch_table.verticalHeader().setVisible(False)
        header = self.epoch_table.horizontalHeader()   # each column as wide as its figures (lr was cut to "2.33e-...")
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)   # sized to the figures at each row
        header.setMinimumSectionSize(30)
        header.setSectionResizeMode(len(EPOCH_COLUMNS) - 1, QHeaderView.ResizeMode.Stretch)   # time takes the rest
        self.epoch_table.setEditTriggers(QTableView.EditTrigger.NoEditTriggers)
        grid.addWidget(self.epoch_table, 2, 1)
        split.addWidget(left)
        self.confusion = ConfusionPanel()
        self.timeline = MemoryTimelineView()     # a recorded memory timeline (Record memory), by graph node
        self.side = QTabWidget()
        self.side.addTab(self.confusion, "Confusion matrix")
        self.side.addTab(self.timeline, "Memory timeline")
        split.addWidget(self.side)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        split.setSizes([960, 640])
        root.addWidget(split, 1)

    def _header(self) -> QHBoxLayout:
        row = QHBoxLayout()
        self.title = ElidedLabel("No run yet: Train (Ctrl+T) starts one")   # never wider than the window
        self.title.setStyleSheet("font-weight: 600; font-size: 11pt;")
        self.state = ElidedLabel("")      # a failure's reason can be a long line
        self.compile_label = ElidedLabel("")   # "Compiling (first time)... 34 s · STAGE" widened a 1280 px window
        self.set_plot_theme(LIGHT)
        self.progress = QProgressBar()
        self.progress.setMinimumWidth(160)
        self.progress.setFormat("%p%")
        self.eta_label = QLabel("")
        self.pause_button = QPushButton("Pause")
        self.stop_button = QPushButton("Stop")
        self.lr_box = QDoubleSpinBox()
        self.lr_box.setDecimals(6)
        # 0 is "no rate": before a run (it read 0.000001, the box's least value, as if a run had it) and
        # for a followed run whose rate this studio does not know; Set LR sends only a positive rate.
        self.lr_box.setRange(0.0, 10.0)
        self.lr_box.setSpecialValueText("\u2014")
        self.lr_box.setSingleStep(1e-4)
        self.lr_box.setToolTip("New peak learning rate, sent to the worker")
        self.lr_box.valueChanged.connect(lambda _v: self._sync_lr_button())
        self.lr_button = QPushButton("Set LR")
        self.record_button = QPushButton("Record memory")
        self.record_button.setToolTip("Record every allocation of the next two training steps by graph node and "
                                      "phase; the Memory timeline tab shows them (Run > Record Memory Timeline)")
        self.record_button.clicked.connect(self.record_memory_requested)
        self.pause_button.clicked.connect(self._toggle_pause)
        self.stop_button.clicked.connect(self.stop_requested)
        self.lr_button.clicked.connect(lambda: self.lr_requested.emit(self.lr_box.value()))
        row.addWidget(self.title, 3)
        row.addWidget(self.state, 2)
        row.addWidget(self.compile_label, 2)
        for control in (self.progress, self.eta_label, self.pause_button, self.stop_button, self.lr_box,
                        self.lr_button, self.record_button):
            row.addWidget(control)
        self.set_controls_enabled(False)
        return row

    def _toggle_pause(self) -> None:
        (self.resume_requested if self._paused else self.pause_requested).emit()
        self._show_paused(not self._paused)   # at once: the worker's state event may come after a backlog of events

    def set_controls_enabled(self, on: bool) -> None:
        for w in (self.pause_button, self.stop_button, self.lr_box, self.record_button):
            w.setEnabled(on)
        self._sync_lr_button()
        if not on:
            self.record_button.setText("Record memory")

    def _sync_lr_button(self) -> None:
        self.lr_button.setEnabled(self.lr_box.isEnabled() and self.lr_box.value() > 0)

    # ------------------------------------------------------------------ inputs
    def begin_run(self, title: str, total_steps: int, lr: float | None = None) -> None:
        """Clear everything for a new run of ``total_steps`` optimizer steps."""
        for plot in self.plots.values():
            plot.clear_curves()
        self._pending.clear()
        self._stale.clear()
        self.epochs.removeRows(0, self.epochs.rowCount())
        self.confusion.clear()
        self.timeline.clear()
        self.clock.start(total_steps)
        self.progress.setRange(0, max(total_steps, 1))
        self.progress.setValue(0)
        self.title.setText(title)
        self.eta_label.setText("")
        self._show_paused(False)
        self.lr_box.setValue(lr or 0.0)
        self.set_controls_enabled(True)
        self.set_state("starting")

    def add_point(self, plot: str, curve: str, x: float, y: float) -> None:
        """Buffer one point; drawn at the next refresh tick."""
        self._pending[(plot, curve)].append((x, y))

    def add_values(self, step: int, values: Mapping[str, float | None]) -> None:
        """Metrics at ``step`` by their names (:mod:`trainer.metrics.names`); those with a curve are plotted."""
        for name, v in values.items():
            curve = CURVES.get(name)
            if curve is not None and isinstance(v, int | float):
                self.add_point(curve.plot, curve.label, step, v * curve.scale)

    def add_metrics(self, m: ev.Metrics) -> None:
        """A ``metrics`` event: its loss, accuracy, lr and samples_per_s at its step."""
        self.add_values(m.step, names.values(m))
        self.clock.update(m.step)

    def add_memory(self, m: ev.Memory, step: int) -> None:
        """A ``memory`` event (bytes): CUDA allocated/reserved/peak, or the process RSS, at ``step``."""
        self.add_values(step, names.values(m))

    def set_memory_title(self, title: str) -> None:
        """Name what the memory plot shows (CUDA's allocator, or the worker process's RSS)."""
        self.plots["memory"].set_title(title)

    def set_predicted_peak(self, nbytes: int | None, unmodelled: int = 0) -> None:
        """A dashed line at the predicted peak (bytes; None: none), with the bf16 kernels' bytes it may lack."""
        label, tip = predicted_line_texts(nbytes, unmodelled) if nbytes else ("", "")
        self.plots["memory"].set_level("predicted", nbytes / MiB if nbytes else None, label, tip=tip)

    def recording_memory(self) -> None:
        """A recording was asked for: the button waits for its ``memory_trace`` event."""
        self.record_button.setEnabled(False)
        self.record_button.setText("Recording...")

    def show_memory_trace(self, e: ev.MemoryTimeline) -> None:
        """A ``memory_trace`` event: its timeline drawn in the Memory timeline tab, brought forward."""
        self.timeline.show_trace(e)
        self.side.setCurrentWidget(self.timeline)
        self.record_button.setText("Record memory")
        self.record_button.setEnabled(self.stop_button.isEnabled())
        self.memory_trace_shown.emit(e.error or "")

    def end_epoch(self, e: ev.EpochEnd, class_names: Sequence[str] = ()) -> None:
        """An ``epoch_end`` event: plot points, a table row, the confusion matrix with the per-class
        figures the worker computed (``class_names``: the class names when the event has none)."""
        self.add_values(e.step, {n: v for n, v in names.values(e).items() if n in EPOCH_CURVES})
        cells = [str(e.epoch)] + [_cell(v, ".4f") for v in (e.train_loss, e.train_accuracy, e.val_loss,
                                                              e.val_accuracy)]   # aligned decimals
        cells.append(_cell(e.lr, ".1e"))
        cells.append(_cell(e.seconds, ".1f" if (e.seconds or 0) >= 0.1 else ".2g"))   # 0.063, 0.009: no 9.0e-03 cut
        items = [QStandardItem(c) for c in cells]
        for it in items:
            it.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self.epochs.appendRow(items)
        fit_columns_to_row(self.epoch_table, self.epochs.rowCount() - 1, len(EPOCH_COLUMNS) - 1)   # the last stretches
        self.epoch_table.scrollToBottom()
        if e.confusion is not None:
            self.confusion.set_matrix(np.asarray(e.confusion), e.classes or class_names, f"epoch {e.epoch}",
                                      per_class=e.per_class)

    def compile_started(self, first_time: bool | None = None, expected_s: float | None = None) -> None:
        """The run compiles its first step: ``first_time`` when the compile caches hold nothing of it
        (the slow case: tens of seconds on a CPU), else ``expected_s``, what its last compile took."""
        self._compile_t0 = time.monotonic()
        self._compile_kind = "first time" if first_time else "cached" if first_time is not None else ""
        self._compile_expected = expected_s
        self._compile_stage = ""
        self._update_compile_label()

    def compile_progress(self, e: ev.CompileProgress) -> None:
        """Which graph the first step compiles now (a ``compile_progress`` event)."""
        self._compile_stage = f"{e.stage}, {e.compiled} done"
        self._update_compile_label()

    def compile_done(self, seconds: float | None = None) -> None:
        took = seconds if seconds is not None else (
            time.monotonic() - self._compile_t0 if self._compile_t0 else 0.0)
        self._compile_t0 = None
        self.compile_label.setText(f"compiled in {took:.1f} s")
        self.clock.start(self.clock.total)  # the ETA counts from after compilation

    def set_state(self, text: str, *, running: bool = True) -> None:
        self.state.setText(text)
        if not running:
            self._compile_t0 = None
            self.compile_label.setText("")
            self.set_controls_enabled(False)
            self.eta_label.setText("")
            self.flush()   # pending points into the buffers; the timer draws the plots, one a tick

    def set_paused(self, paused: bool) -> None:
        self._show_paused(paused)
        (self.clock.pause if paused else self.clock.resume)()
        self.set_state("paused" if paused else "running")

    def _show_paused(self, paused: bool) -> None:   # the Pause button: what a click asks next
        self._paused = paused
        self.pause_button.setText("Resume" if paused else "Pause")

    # ------------------------------------------------------------------ redraw
    def flush(self, everything: bool = False) -> None:
        """The timer's tick: move pending points into the plots' buffers, then redraw ONE plot
        whose data changed (round robin), or all of them with ``everything``.

        A plot of many points costs up to ~30 ms to paint on a slow CPU; drawing one per tick keeps
        every turn of the event loop short, and each plot still updates several times a second.
        """
        if self._pending:
            pending, self._pending = self._pending, defaultdict(list)
            for (plot, curve), pts in pending.items():
                xs, ys = zip(*pts, strict=True)
                self._ensure_curve(plot, curve)
                self.plots[plot].append(curve, xs, ys)
                if plot not in self._stale:
                    self._stale.append(plot)
        if everything:
            while self._stale:
                self.plots[self._stale.pop(0)].refresh()
        elif self._stale:
            self.plots[self._stale.pop(0)].refresh()
        self.progress.setValue(min(self.clock.done, self.progress.maximum()))
        eta = self.clock.eta()
        if eta is not None and self.stop_button.isEnabled():
            self.eta_label.setText(f"ETA {format_duration(eta)}")
        self._update_compile_label()

    def _ensure_curve(self, plot: str, label: str) -> None:
        style = _STYLES.get((plot, label))
        if style is not None:
            self.plots[plot].add_curve(label, style.colour, symbols=style.symbols)

    def set_plot_theme(self, theme: str | PlotTheme) -> None:
        """The dashboard's own coloured text (its plots and matrix are themed as views of their own)."""
        self.compile_label.setStyleSheet(f"color: {plot_theme(theme).notice}; font-weight: 600;")

    def _update_compile_label(self) -> None:
        if self._compile_t0 is None:
            return
        took = time.monotonic() - self._compile_t0
        kind = f" ({self._compile_kind})" if self._compile_kind else ""
        text = f"Compiling{kind}... {took:.0f} s"
        if self._compile_expected is not None:
            text += f" of ~{max(self._compile_expected, 1):.0f}"
        if self._compile_stage:
            text += f" \u00b7 {self._compile_stage}"
        self.compile_label.setText(text)


def _cell(v: float | None, fmt: str) -> str:
    """A table cell; a value too small for the fixed format is shown in scientific form, not as 0."""
    if v is None:
        return ""
    if fmt.endswith("f") and v != 0 and abs(v) < 10 ** -int(fmt[1:-1]):
        return format(v, ".1e")
    return format(v, fmt)


class Curve(NamedTuple):
    """Where a metric is drawn: its plot, its curve's label there, its colour (None: the plot's palette),
    markers on each point (sparse per-epoch data), and the factor from its unit to the plot's."""

    plot: str
    label: str
    colour: str | None = None
    symbols: bool = False
    scale: float = 1.0


# metric name (trainer.metrics.names) -> its curve: the one entry a metric needs to be plotted live
CURVES = {
    names.TRAIN_LOSS.name: Curve("loss", "train", "#0072B2"),
    names.VAL_LOSS.name: Curve("loss", "val", "#D55E00", symbols=True),
    names.TRAIN_ACCURACY.name: Curve("accuracy", "train", "#0072B2"),
    names.VAL_ACCURACY.name: Curve("accuracy", "val", "#D55E00", symbols=True),
    names.LR.name: Curve("lr", "lr", "#009E73"),
    names.SAMPLES_PER_S.name: Curve("throughput", "samples/s", "#CC79A7"),
    **{m.name: Curve("memory", m.field, scale=1 / MiB) for m in (
        names.MEMORY_ALLOCATED, names.MEMORY_RESERVED, names.MEMORY_PEAK, names.MEMORY_RSS, names.MEMORY_PEAK_RSS)},
}
EPOCH_CURVES = (names.VAL_LOSS.name, names.VAL_ACCURACY.name)   # what an epoch_end adds to the plots
_STYLES = {(c.plot, c.label): c for c in CURVES.values() if c.colour}
