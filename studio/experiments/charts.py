"""The Experiments workspace's four charts of a study (pyqtgraph), each fed a study report
(:func:`trainer.sweep.report.study_report`): optimisation history, parallel coordinates, parameter
importances, intermediate values with the pruned trials marked."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyqtgraph as pg

from ..training.plot_theme import BLUE, GREEN, LIGHT, VERMILLION, PlotTheme, plot_theme

STATE_COLORS = {"complete": BLUE, "pruned": VERMILLION, "running": GREEN}
PARALLEL_Y = (-0.27, 1.03)     # the parallel coordinates' view: 0..1 for the values, below it the axes' names


class Chart(pg.PlotWidget):
    """A plot with a title that repaints itself in the studio's light or dark plot colours."""

    def __init__(self, title: str, x_label: str, y_label: str) -> None:
        super().__init__()
        self.theme: PlotTheme = LIGHT
        self.title = title
        self.report: dict[str, Any] | None = None
        self.note = ""      # what an empty chart says instead of its marks
        self.setMinimumSize(240, 180)
        self.plotItem.setLabel("bottom", x_label)
        self.plotItem.setLabel("left", y_label)
        self.plotItem.showGrid(x=True, y=True, alpha=0.25)
        for name in ("left", "bottom"):
            self.plotItem.getAxis(name).enableAutoSIPrefix(False)   # 0.99, not 990 (x0.001)
        self.setMenuEnabled(False)
        self.set_plot_theme(LIGHT)

    def set_plot_theme(self, theme: str | PlotTheme) -> None:
        self.theme = plot_theme(theme)
        self.setBackground(self.theme.background)
        self.plotItem.setTitle(self.title, color=self.theme.text, size="10pt")
        for name in ("left", "bottom"):
            axis = self.plotItem.getAxis(name)
            axis.setPen(pg.mkPen(self.theme.axis))
            axis.setTextPen(pg.mkPen(self.theme.text))
        if self.report is not None:
            self.show_report(self.report)

    def pen(self, color: str, width: float = 1.5, alpha: int = 255) -> Any:
        c = pg.mkColor(self.theme.curve(color))
        c.setAlpha(alpha)
        return pg.mkPen(c, width=width)

    def show_report(self, report: dict[str, Any]) -> None:
        self.report = report
        self.plotItem.clear()
        self.note = ""
        self.plotItem.enableAutoRange()     # a note's fixed 0..1 view must not cut the marks drawn after it
        self.draw(report)

    def say(self, note: str) -> None:
        """An empty chart says what its marks wait for (an empty frame, or 0.2 ... 0.8 "trials", said nothing)."""
        self.note = note
        text = pg.TextItem(note, color=self.theme.text, anchor=(0.5, 0.5))
        text.setPos(0.5, 0.5)
        self.plotItem.addItem(text)
        self.plotItem.setXRange(0, 1)
        self.plotItem.setYRange(0, 1)

    def draw(self, report: dict[str, Any]) -> None:
        raise NotImplementedError


class HistoryChart(Chart):
    """Each complete trial's value by trial number, and the best so far as a step line."""

    def __init__(self) -> None:
        super().__init__("Optimisation history", "trial", "objective")

    def draw(self, report: dict[str, Any]) -> None:
        done = [(t["number"], t["value"]) for t in report["trials"] if t["state"] == "complete"]
        self.plotItem.setLabel("left", report["metric"])
        if not done:
            self.say("no complete trial yet")
            return
        xs, ys = np.array([d[0] for d in done], float), np.array([d[1] for d in done], float)
        best = np.maximum.accumulate(ys) if report["direction"] == "maximize" else np.minimum.accumulate(ys)
        # trials are whole numbers: ticks at whole trials (one trial's axis read -0.4 ... 0.4), a little room
        # either side of the first and the last
        whole_ticks(self.plotItem.getAxis("bottom"), xs.min(), xs.max())
        self.plotItem.setXRange(xs.min() - 0.5, xs.max() + 0.5, padding=0)
        if np.ptp(ys) == 0:     # one value: pyqtgraph's own ±0.5 around it read "accuracy 1.4"
            self.plotItem.setYRange(ys[0] - 0.02, ys[0] + 0.02, padding=0)
        self.plotItem.plot(xs, ys, pen=None, symbol="o", symbolSize=8, symbolBrush=self.theme.curve(BLUE),
                           symbolPen=None, name="trial")
        self.plotItem.plot(xs, best, pen=self.pen(VERMILLION, 2), stepMode=None, name="best so far")


class IntermediateChart(Chart):
    """Each trial's objective epoch by epoch; pruned trials in vermillion, ending in a cross."""

    def __init__(self) -> None:
        super().__init__("Intermediate values (x: pruned)", "epoch", "objective")

    def draw(self, report: dict[str, Any]) -> None:
        self.plotItem.setLabel("left", report["metric"])
        epochs = [int(k) for t in report["trials"] for k, v in t["intermediate"].items() if v is not None]
        if not epochs:
            self.say("no epoch measured yet")
            return
        whole_ticks(self.plotItem.getAxis("bottom"), min(epochs), max(epochs))    # epochs, not 1.2, 1.4 ...
        for t in report["trials"]:
            points = sorted((int(k), v) for k, v in t["intermediate"].items() if v is not None)
            if not points:
                continue
            color = STATE_COLORS.get(t["state"], "#888888")
            xs, ys = [p[0] for p in points], [p[1] for p in points]
            self.plotItem.plot(xs, ys, pen=self.pen(color, 1.5, 200))
            if t["state"] == "pruned":
                self.plotItem.plot([xs[-1]], [ys[-1]], pen=None, symbol="x", symbolSize=13,
                                   symbolBrush=self.theme.curve(VERMILLION), symbolPen=self.pen(VERMILLION, 2))


class ImportanceChart(Chart):
    """Optuna's parameter importances as horizontal bars, the most important on top."""

    def __init__(self) -> None:
        super().__init__("Parameter importances", "importance", "")

    def draw(self, report: dict[str, Any]) -> None:
        found = sorted(report.get("importances", {}).items(), key=lambda kv: kv[1])
        axis = self.plotItem.getAxis("left")
        axis.setWidth(140)      # room for a node parameter's name
        axis.setTicks([[(i, _short(name.removeprefix("node."), 20)) for i, (name, _v) in enumerate(found)]])
        if not found:   # an empty frame said nothing: say what the bars need
            complete = sum(t["state"] == "complete" for t in report["trials"])
            self.say("needs 2 complete trials" if complete < 2 else
                     "the complete trials' values do not tell the parameters apart yet")
            return
        bars = pg.BarGraphItem(x0=0, y=np.arange(len(found)), height=0.6, width=[v for _k, v in found],
                               brush=self.theme.curve(BLUE), pen=None)
        self.plotItem.addItem(bars)
        self.plotItem.setXRange(0, 1)
        self.plotItem.setYRange(-0.5, len(found) - 0.5)   # every bar whole, the most important on top


class ParallelChart(Chart):
    """Parallel coordinates: one axis per parameter and the objective; each finished trial a line
    through its values (log axes for log-sampled numbers), coloured by state, the best one thick."""

    def __init__(self) -> None:
        super().__init__("Parallel coordinates", "", "")
        self.plotItem.getAxis("left").setTicks([[(0, "low"), (1, "high")]])

    def draw(self, report: dict[str, Any]) -> None:
        names = list(report.get("ranges", {}))
        axes = [*names, report["metric"]]
        self.plotItem.getAxis("bottom").setTicks([[]])
        low, high = PARALLEL_Y
        for i, name in enumerate(axes):     # names under their axes, every other one lower: no overlap
            line = pg.InfiniteLine(pos=i, angle=90, pen=self.pen(self.theme.axis, 1))
            line.setSpan(-low / (high - low), 1.0)     # from the axis's 0 up: the names below stay clear of it
            self.plotItem.addItem(line)
            label = pg.TextItem(_short(name.removeprefix("node."), 22), color=self.theme.text, anchor=(0.5, 0))
            label.setPos(i, -0.06 - 0.1 * (i % 2))
            self.plotItem.addItem(label)
        done = [t for t in report["trials"] if t["state"] in ("complete", "pruned") and t["params"]]
        if not done:
            label = pg.TextItem("no finished trial yet", color=self.theme.text, anchor=(0.5, 0.5))
            label.setPos((len(axes) - 1) / 2, 0.5)
            self.plotItem.addItem(label)
            self.note = label.toPlainText()
        values = [t["value"] for t in done if t["value"] is not None]
        lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
        best = (report.get("best") or {}).get("number")
        for t in done:
            ys = [_scaled(t["params"].get(n), report["ranges"][n]) for n in names]
            ys.append(0.5 if hi == lo else (t["value"] - lo) / (hi - lo) if t["value"] is not None else float("nan"))
            color = STATE_COLORS.get(t["state"], "#888888")
            width, alpha = (3.5, 255) if t["number"] == best else (1.5, 170)
            self.plotItem.plot(list(range(len(axes))), ys, pen=self.pen(color, width, alpha), connect="finite")
        self.plotItem.setYRange(low, high, padding=0)
        self.plotItem.setXRange(-0.45, len(axes) - 0.55, padding=0)


def whole_ticks(axis: pg.AxisItem, low: float, high: float) -> None:
    """Ticks at whole numbers only (trials, epochs), at most about eight of them."""
    step = max(1, math.ceil((high - low) / 8))
    axis.setTickSpacing(step, step)


def _scaled(value: Any, axis: list[Any]) -> float:
    """A parameter's value on its axis, 0..1."""
    if value is None:
        return float("nan")
    if axis[0] == "choice":
        choices = axis[1:]
        return choices.index(value) / max(len(choices) - 1, 1) if value in choices else float("nan")
    low, high, scale = axis
    if scale == "log" and low > 0 and value > 0:
        return (math.log(value) - math.log(low)) / (math.log(high) - math.log(low))
    return (value - low) / (high - low) if high != low else 0.5


def _short(name: str, n: int = 18) -> str:
    return name if len(name) <= n else "…" + name[-(n - 1):]
