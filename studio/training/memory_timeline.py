"""The memory timeline of recorded training steps, stacked by graph node; a click on a band selects its node.

It draws the ``memory_trace`` event's timeline (``trainer.memory.timeline``): time on x, live bytes above
what lived before the recording on y, one filled band per node (the largest at the peak first,
the rest as "other"). Drawn here, offline, with pyqtgraph: PyTorch's memory_viz needs a browser
and its CDN. ``node_clicked(node id)`` lets the studio select the node on the canvas.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from graph_editor.model.units import MiB, nbytes

from .plot_theme import PALETTE, PlotTheme, plot_theme

EMPTY = ("No memory timeline yet. Record memory (on the dashboard, or Run > Record Memory Timeline) records "
         "the next two training steps of the running job, every allocation by graph node.")


def stack(timeline: dict[str, Any], by: str = "nodes") -> tuple[np.ndarray, list[str], np.ndarray]:
    """(t in ms, band names, cumulative tops in MiB: one row per band, bottom band first); ``by``:
    "nodes" (graph nodes) or "phases" (forward, loss, backward, optimizer, unattributed)."""
    t = np.asarray(timeline.get("t_ms", []), dtype=float)
    series = timeline.get(by) or {}
    names = list(series)
    values = np.array([np.maximum(np.asarray(series[n], dtype=float), 0) for n in names]) / MiB \
        if names else np.zeros((0, len(t)))
    return t, names, np.cumsum(values, axis=0) if len(names) else values


def band_at(timeline: dict[str, Any], t_ms: float, mib: float, by: str = "nodes") -> str | None:
    """The band (node or phase) under a point of the plot, or None above the stack or outside the time range."""
    t, names, tops = stack(timeline, by)
    if not len(t) or t_ms < t[0] or t_ms > t[-1] or mib < 0:
        return None
    i = int(np.clip(np.searchsorted(t, t_ms, side="right") - 1, 0, len(t) - 1))
    for name, top in zip(names, tops[:, i], strict=True):
        if mib <= top:
            return name
    return None


class MemoryTimelineView(QWidget):
    """A stacked area plot of a recorded timeline; ``show_trace(event fields)``."""

    node_clicked = Signal(str)

    def __init__(self, parent: QWidget | None = None, theme: str | PlotTheme = "light") -> None:
        super().__init__(parent)
        self.theme = plot_theme(theme)
        self.timeline: dict[str, Any] = {}
        self.steps_text = ""                  # the steps of the recording drawn ("steps 12-13")
        self.by = "nodes"
        lay = QVBoxLayout(self)
        head = QHBoxLayout()
        self.title = QLabel(EMPTY)
        self.title.setWordWrap(True)
        head.addWidget(self.title, 1)
        self.by_box = QComboBox()
        self.by_box.addItem("by layer", "nodes")
        self.by_box.addItem("by phase", "phases")
        self.by_box.setToolTip("Stack the live bytes by the graph node that allocated them, or by phase "
                               "(forward, loss, backward, optimizer)")
        self.by_box.currentIndexChanged.connect(self._on_by)
        head.addWidget(self.by_box, 0, Qt.AlignmentFlag.AlignTop)
        lay.addLayout(head)
        self.plot = pg.PlotWidget()
        self.plot.setLabel("bottom", "time in the recorded steps (ms)")
        self.plot.setLabel("left", "live (MiB, above the start)")
        for axis in ("bottom", "left"):    # our units are in the label: no "MiB (x0.001)" under 1 MiB or 1 ms
            self.plot.getAxis(axis).enableAutoSIPrefix(False)
        self.plot.setMouseEnabled(x=True, y=False)
        self.legend = self.plot.addLegend(offset=(-10, 10))
        self.plot.scene().sigMouseClicked.connect(self._clicked)
        lay.addWidget(self.plot, 1)
        self.bands: list[pg.FillBetweenItem] = []
        self.names: list[str] = []            # the band of each entry of ``bands``, bottom first
        self.highlighted: str | None = None   # the band drawn strong (the canvas's selected node)
        self.set_plot_theme(self.theme)

    def set_plot_theme(self, theme: str | PlotTheme) -> None:
        self.theme = plot_theme(theme)
        self.plot.setBackground(self.theme.background)
        self.legend.setBrush(self.theme.panel)          # readable over the bands it covers
        self.legend.setLabelTextColor(self.theme.text)
        for axis in ("bottom", "left"):
            ax = self.plot.getAxis(axis)
            ax.setPen(self.theme.axis)
            ax.setTextPen(self.theme.text)
        if self.timeline:
            self._draw()

    def _on_by(self) -> None:
        self.by = self.by_box.currentData()
        self._draw()

    def clear(self) -> None:
        """Back to the empty view (a new run)."""
        self.timeline = {}
        self.title.setText(EMPTY)
        self._draw()

    def highlight(self, ids: list[str]) -> None:
        """Draw the band of the first of ``ids`` that has one strong and the others faint (the canvas's
        selection); no such band: every band as usual."""
        band = next((i for i in ids if i in self.names), None)
        if band == self.highlighted:
            return
        self.highlighted = band
        self._shade()

    def _shade(self) -> None:
        for name, band in zip(self.names, self.bands, strict=True):
            band.setOpacity(0.75 if self.highlighted in (None, name) else 0.25)
            band.setPen(pg.mkPen(self.theme.text, width=2) if name == self.highlighted else None)

    def show_trace(self, event: Any) -> None:
        """Draw a ``memory_trace`` event (a typed event or its dict)."""
        get = event.get if hasattr(event, "get") else lambda k, d=None: getattr(event, k, d)
        if get("error"):   # a recording that failed: the one drawn before (if any) stays, and says it is older
            before = f" Below: the previous recording ({self.steps_text})." if self.names else ""
            self.title.setText(f"No timeline: {get('error')}.{before}")
            return
        self.timeline = get("timeline") or {}
        if "phases" not in self.timeline:          # a worker of before: by layer only
            self.by_box.setCurrentIndex(0)
        self.by_box.setEnabled("phases" in self.timeline)
        self.steps_text = f"steps {get('step')}-{get('step') + max(get('steps', 1), 1) - 1}"
        self.title.setText(f"{self.steps_text.capitalize()}: peak "
                           f"{nbytes(get('peak_bytes', 0))} in the {get('peak_phase')} at {get('peak_node')}; "
                           f"{get('attributed', 0):.1%} of the allocated bytes attributed. Click a band to "
                           "select its node.")
        self._draw()

    def _draw(self) -> None:
        for item in self.bands:
            self.plot.removeItem(item)
        self.bands, self.names = [], []
        self.plot.clear()
        self.legend.clear()
        t, names, tops = stack(self.timeline, self.by)
        if not len(t):
            return
        below = pg.PlotCurveItem(t, np.zeros_like(t))    # the base (a PlotDataItem without a pen has no path:
        #                                                   the bottom band was never filled)
        for k, (name, top) in enumerate(zip(names, tops, strict=True)):
            colour = self.theme.curve(PALETTE[k % len(PALETTE)]) if name not in ("other", "unattributed") \
                else self.theme.axis
            curve = pg.PlotDataItem(t, top, pen=pg.mkPen(colour, width=1), name=name)
            band = pg.FillBetweenItem(below, curve, brush=pg.mkBrush(colour))
            band.setOpacity(0.75)
            self.plot.addItem(band)
            self.plot.addItem(curve)
            self.bands.append(band)
            self.names.append(name)
            below = curve
        self._shade()
        self.plot.enableAutoRange()

    def _clicked(self, ev: Any) -> None:
        vb = self.plot.getViewBox()
        if not self.timeline or not vb.sceneBoundingRect().contains(ev.scenePos()):
            return
        p = vb.mapSceneToView(ev.scenePos())
        node = band_at(self.timeline, p.x(), p.y(), self.by)
        if self.by == "nodes" and node is not None and node != "other" and not node.startswith("("):
            self.node_clicked.emit(node)


def _preview(argv: list[str]) -> int:
    """``python -m studio.training.memory_timeline [--screenshot PNG]``: two digits_cnn training steps
    recorded on this CPU, drawn; a click on a band prints its node."""
    import sys
    from pathlib import Path

    import torch
    from PySide6.QtWidgets import QApplication

    from graph_editor.building import build_module
    from graph_editor.model import load_graph
    from trainer.loop import make_train_step
    from trainer.memory.timeline import record_job_steps
    from trainer.optim import make_optimizer
    from trainer.spec import OptimSpec

    app = QApplication.instance() or QApplication(sys.argv)
    graph = load_graph(Path(__file__).resolve().parents[2] / "assets" / "templates" / "digits_cnn.graph.json")
    model = build_module(graph)
    opt = make_optimizer(model, OptimSpec())
    step, _ = make_train_step(model, opt, device=torch.device("cpu"), precision="fp32", label_smoothing=0.0)
    batch = (torch.randn(64, *graph.input_spec.shape), torch.zeros(64, dtype=torch.long))
    step(*batch)
    view = MemoryTimelineView()
    view.show_trace({"step": 2, **record_job_steps(model, step, [batch, batch]).summary()})
    view.node_clicked.connect(lambda node: print(f"selected {node}", flush=True))
    view.resize(900, 460)
    view.show()
    if "--screenshot" in argv:
        app.processEvents()
        view.grab().save(argv[argv.index("--screenshot") + 1])
        return 0
    return app.exec()


if __name__ == "__main__":
    import sys

    raise SystemExit(_preview(sys.argv[1:]))
