"""The gradient-flow plot (per layer, in network order, log scale) and a node's sparkline.

Each inspect event replaces the flow plot's bars (||dL/dW||, for nodes with parameters) and line
(||dL/dy||, every node); a vanishing or exploding node's bar is drawn in the warning colour. The
sparkline is the history of one node's figure over the run's inspections.
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QFontMetricsF, QResizeEvent

from trainer.inspection import EXPLODING, VANISHING, InspectReport

from ..training.plot_theme import BLUE, VERMILLION, PlotTheme, plot_theme


def _log(values: list[float | None]) -> np.ndarray:
    return np.array([math.log10(v) if v is not None and v > 0 and math.isfinite(v) else np.nan for v in values])


class GradientFlowPlot(pg.PlotWidget):
    """log10 of each node's gradient norms at the latest inspection, nodes in network order."""

    def __init__(self, parent=None, theme: str | PlotTheme = "dark") -> None:  # noqa: ANN001 - Qt parent
        super().__init__(parent)
        self.theme = plot_theme(theme)
        item = self.getPlotItem()
        item.setLabel("left", "log10 gradient norm")
        item.setMenuEnabled(False)
        self.setMouseEnabled(x=True, y=False)
        self.legend = item.addLegend(offset=(-10, 10))
        self.bars = pg.BarGraphItem(x=[], height=[], y0=[], width=0.7, name="||dL/dW||", brush=BLUE, pen=None)
        self.line = pg.PlotDataItem([], [], name="||dL/dy||", symbol="o", symbolSize=5)
        item.addItem(self.bars)
        item.addItem(self.line)
        self.limits = [pg.InfiniteLine(angle=0, pos=math.log10(v), movable=False) for v in (VANISHING, EXPLODING)]
        for line in self.limits:
            item.addItem(line)
        self.nodes: list[str] = []
        self.step: int | None = None
        self.set_plot_theme(self.theme)

    def set_plot_theme(self, theme: str | PlotTheme) -> None:
        t = self.theme = plot_theme(theme)
        self.setBackground(t.background)
        item = self.getPlotItem()
        for axis in ("left", "bottom"):
            item.getAxis(axis).setPen(t.axis)
            item.getAxis(axis).setTextPen(t.text)
        item.showGrid(x=False, y=True, alpha=t.grid_alpha)
        self.legend.setLabelTextColor(t.text)
        for _sample, label in self.legend.items:
            label.setText(label.text)      # a label keeps its colour until its text is set again
        self.line.setPen(pg.mkPen(t.curve(VERMILLION), width=1.5))
        self.line.setSymbolBrush(t.curve(VERMILLION))
        self.line.setSymbolPen(None)
        for line in self.limits:
            line.setPen(pg.mkPen(t.crosshair, width=1, style=Qt.PenStyle.DashLine))
        self._paint_bars()

    def show_report(self, report: InspectReport) -> None:
        """Replace the plot with ``report``'s figures."""
        self.nodes = [n.node for n in report.nodes]
        self.step = report.step
        self._grad_w = [n.grad_w for n in report.nodes]
        self._grad_out = [n.grad_out for n in report.nodes]
        flagged = {node for node, _, _, _ in report.flags()}
        self._flagged = [n in flagged for n in self.nodes]
        self._paint_bars()
        xs = np.arange(len(self.nodes), dtype=float)
        self.line.setData(xs, _log(self._grad_out), connect="finite")
        self._tick_names()
        self.getPlotItem().setTitle(f"gradient flow at step {report.step}", color=self.theme.text, size="9pt")
        # room on the right for the legend, so it never covers the last layers' bars
        self.getPlotItem().setXRange(-0.8, max(len(self.nodes) - 0.2, 1) + max(3, len(self.nodes) // 8), padding=0)
        finite = [v for v in (*_log(self._grad_w), *_log(self._grad_out)) if np.isfinite(v)]
        lo = min([math.log10(VANISHING), *finite]) - 0.5
        hi = max([math.log10(EXPLODING) if max(finite, default=0) > 1 else 1.0, *finite]) + 0.5
        self.getPlotItem().setYRange(lo, hi, padding=0)

    def clear_report(self) -> None:
        """No report: no bars, no line, no title (another graph was opened). Not ``clear``: PlotWidget
        sets that to its PlotItem's, which would remove the bars themselves."""
        self.nodes, self.step = [], None
        self._grad_w, self._grad_out, self._flagged = [], [], []
        self.bars.setOpts(x=[], y0=[], height=[])
        self.bars.hide()         # pyqtgraph cannot paint a bar graph of no bars
        self.line.setData([], [])
        self._tick_names()
        self.getPlotItem().setTitle("")

    def _tick_names(self) -> None:
        """As many layer names along the axis as fit side by side at the plot's width (the others by
        zooming in); the unnamed layers keep a tick mark."""
        axis = self.getPlotItem().getAxis("bottom")
        if not self.nodes:
            axis.setTicks(None)
            return
        widest = max(QFontMetricsF(axis.style.get("tickFont") or self.font()).horizontalAdvance(n)
                     for n in self.nodes)
        shown = len(self.nodes) + max(3, len(self.nodes) // 8)    # the x range, legend room included
        room = max(1.0, self.width() * 0.85 / shown)              # pixels per layer
        every = max(1, math.ceil((widest + 14) / room))
        axis.setTicks([[(i, n) for i, n in enumerate(self.nodes)][::every],
                       [(i, "") for i in range(len(self.nodes))]])

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if getattr(self, "nodes", None):   # a resize during PlotWidget's own set-up comes before any plot
            self._tick_names()

    def _paint_bars(self) -> None:
        if not self.nodes:
            return
        self.bars.show()
        heights = _log(self._grad_w)
        xs = np.arange(len(self.nodes), dtype=float)
        keep = np.isfinite(heights)
        base = math.log10(VANISHING) - 1
        self.bars.setOpts(brush=self.theme.curve(BLUE))   # the legend's sample
        colors = [pg.mkBrush(VERMILLION if flag else self.theme.curve(BLUE))
                  for flag, k in zip(self._flagged, keep, strict=True) if k]
        self.bars.setOpts(x=xs[keep], y0=np.full(int(keep.sum()), base), height=heights[keep] - base,
                          brushes=colors, pens=[pg.mkPen(None)] * len(colors))

    def bar_count(self) -> int:
        x = self.bars.opts.get("x")
        return 0 if x is None else len(x)


class Sparkline(pg.PlotWidget):
    """One node's figure over the run's inspections (step on x)."""

    def __init__(self, parent=None, theme: str | PlotTheme = "dark") -> None:  # noqa: ANN001 - Qt parent
        super().__init__(parent)
        self.theme = plot_theme(theme)
        item = self.getPlotItem()
        item.setMenuEnabled(False)
        item.hideButtons()
        self.setMouseEnabled(x=False, y=False)
        self.curve = pg.PlotDataItem([], [], symbol="o", symbolSize=4)
        item.addItem(self.curve)
        self.setMinimumHeight(130)    # title, plot and axis: below this the y labels pile up
        left = item.getAxis("left")
        left.setWidth(48)
        self.set_plot_theme(self.theme)

    def set_plot_theme(self, theme: str | PlotTheme) -> None:
        t = self.theme = plot_theme(theme)
        self.setBackground(t.background)
        for axis in ("left", "bottom"):
            self.getPlotItem().getAxis(axis).setPen(t.axis)
            self.getPlotItem().getAxis(axis).setTextPen(t.text)
        self.curve.setPen(pg.mkPen(t.curve(BLUE), width=1.5))
        self.curve.setSymbolBrush(t.curve(BLUE))
        self.curve.setSymbolPen(None)

    def show_series(self, title: str, steps: list[int], values: list[float], log: bool) -> None:
        """Plot one node's history; with no steps only the title shows (empty axes read as data)."""
        item = self.getPlotItem()
        for axis in ("left", "bottom"):
            item.showAxis(axis, bool(steps))
        self.getPlotItem().setLogMode(y=log)
        ys = [v if (not log or v > 0) else np.nan for v in values]
        self.curve.setData(np.array(steps, dtype=float), np.array(ys, dtype=float), connect="finite")
        item.getAxis("left").setTicks(_three_ticks(ys, log))
        if len(steps) == 1:   # one inspection: from the run's start to it (pyqtgraph spans +-0.4 of a step)
            item.setXRange(0, max(steps[0], 1), padding=0.05)
        else:
            item.enableAutoRange(axis="x")
        self.getPlotItem().setTitle(title, color=self.theme.text, size="8pt")


def _three_ticks(values: list[float], log: bool) -> list[list[tuple[float, str]]] | None:
    """The low, middle and high value as the only y labels: at a sparkline's height pyqtgraph's own
    ticks (a log axis labels every 0.01 inside one decade) pile up unreadably. None: no data."""
    finite = [v for v in values if np.isfinite(v) and (v > 0 or not log)]
    if not finite:
        return None
    lo, hi = min(finite), max(finite)
    if log:
        spots = np.unique(np.linspace(np.log10(lo), np.log10(hi), 3))
        return [[(float(p), f"{10 ** p:.2g}") for p in spots]]
    spots = np.unique(np.linspace(lo, hi, 3))
    return [[(float(v), f"{v:.3g}") for v in spots]]
