"""Live curve plots for the training dashboard.

A :class:`~studio.training.series.SeriesBuffer` keeps each curve's points (arrays that double when
full) with a min/max pyramid beside them. A :class:`CurvePlot` draws, for the x range in view, what
the buffer's peak decimation gives: about two points per pixel, clipped to the view, at a cost that
does not grow with the history (a million points draw as fast as ten thousand). It shows a
crosshair readout: the x under the mouse and every curve's y there. Points are only
pushed to pyqtgraph by :meth:`CurvePlot.refresh`, which the dashboard calls from a ~10 Hz timer,
so a burst of events costs one redraw. Colours come from a
:class:`~studio.training.plot_theme.PlotTheme` (light or dark) and change live with
:meth:`CurvePlot.set_plot_theme`.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QPointF, QRectF, Qt
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QWidget

from .log_axis import LogLabelAxis
from .plot_theme import LIGHT, PALETTE, PlotTheme, plot_theme
from .series import SeriesBuffer

__all__ = ["CurvePlot", "SeriesBuffer", "format_value"]


def _floats(values: Iterable[float]) -> np.ndarray:
    """An array as it is (a long run's history arrives as arrays), any other iterable read once."""
    return values if isinstance(values, np.ndarray) else np.fromiter(values, float)


def format_value(v: float) -> str:
    """Compact number for readouts: 4 significant digits, scientific when tiny or huge."""
    if v == 0 or 1e-3 <= abs(v) < 1e6:
        return f"{v:.4g}"
    return f"{v:.3e}"


class LevelLine(pg.InfiniteLine):
    """A labelled horizontal line (a predicted peak, a budget) that the view's auto-range includes:
    pyqtgraph's own line counts as y = 0 there, so a level above the curves would be off the plot."""

    def __init__(self, y: float, label: str, color: str, tip: str = "") -> None:
        super().__init__(pos=y, angle=0, movable=False, label=label,
                         labelOpts={"position": 0.03, "anchors": [(0, 1), (0, 1)], "color": color})
        self.setPen(pg.mkPen(color, width=1, style=Qt.PenStyle.DashLine))
        self.label.setToolTip(tip)

    def dataBounds(self, axis: int, frac: float = 1.0, orthoRange: object = None) -> tuple[float, float] | None:  # noqa: N802
        return None if axis == 0 else (self.value(), self.value())


class CurvePlot(pg.PlotWidget):
    """A titled plot of named curves fed from :class:`SeriesBuffer`s, with a crosshair.

    ``theme`` ("light", "dark" or a :class:`PlotTheme`) colours it; :meth:`set_plot_theme`
    switches live. Curve colours are asked for as palette colours and shown as the theme maps them.
    """

    # Qt's raster engine draws 1-pixel lines on a fast path; 2-pixel ones cost ~5x more per paint.
    PEN_WIDTH = 1

    def __init__(self, title: str, y_label: str = "", x_label: str = "step", *,
                 legend: str = "top", theme: str | PlotTheme = LIGHT, parent: QWidget | None = None) -> None:
        super().__init__(parent=parent, axisItems={"left": LogLabelAxis("left")})   # log y: labels that fit
        item = self.getPlotItem()
        item.setTitle(title, size="11pt")
        item.setLabel("left", y_label)
        item.setLabel("bottom", x_label)
        for axis in ("left", "bottom"):
            # Axes whose size does not follow every range change: a resized axis re-lays the plot out
            # and paints it again. No SI-prefix relabelling, no shrinking text space, and one level of
            # minor ticks (each level is a set of grid lines to paint: the third cost ~2.5 ms a frame).
            ax = item.getAxis(axis)
            ax.enableAutoSIPrefix(False)
            ax.setStyle(autoReduceTextSpace=False, maxTickLevel=1)
        self._legend = item.addLegend(offset=(-8, 8 if legend == "top" else -8))
        self._legend_top = legend == "top"      # the crosshair readout goes to the other edge
        self._legend_corner: tuple[bool, bool | None] = (True, self._legend_top)   # refresh() moves it off the curves
        self._buffers: dict[str, SeriesBuffer] = {}
        self._items: dict[str, pg.PlotDataItem] = {}
        self._styles: dict[str, tuple[str, bool, bool]] = {}  # name -> (palette colour, dashed, symbols)
        self._dirty: set[str] = set()
        self._shown: tuple[float, float] = (-np.inf, np.inf)   # the x window the curves were drawn for
        self._y_spans: dict[str, tuple[float, float]] = {}       # each curve's drawn y extent
        self._levels: dict[str, tuple[LevelLine, str]] = {}      # name -> (line, palette colour)
        self._min_y_range: float | None = None
        item.vb.sigXRangeChanged.connect(self._on_view_changed)
        item.vb.sigStateChanged.connect(self._on_view_changed)
        self._setup_crosshair()
        self.theme = LIGHT
        self.set_plot_theme(theme)

    def set_plot_theme(self, theme: str | PlotTheme) -> None:
        """Recolour everything (background, axes, grid, title, legend, readout, curves) for ``theme``."""
        t = self.theme = plot_theme(theme)
        self.setBackground(t.background)
        item = self.getPlotItem()
        item.titleLabel.setText(item.titleLabel.text, color=t.text)
        for axis in ("left", "bottom"):
            item.getAxis(axis).setPen(t.axis)       # also colours the axis label: the text pen follows
            item.getAxis(axis).setTextPen(t.text)
        item.showGrid(x=True, y=True, alpha=t.grid_alpha)
        self._legend.setBrush(t.panel)
        self._legend.setLabelTextColor(t.text)
        for _sample, label in self._legend.items:
            label.setText(label.text)              # a label keeps its colour until its text is set again
        self._vline.setPen(pg.mkPen(t.crosshair, width=1, style=Qt.PenStyle.DotLine))
        self._readout.setColor(t.text)
        self._readout.fill = pg.mkBrush(t.panel)
        self._readout.update()
        for name, item_ in self._items.items():
            self._style_curve(item_, *self._styles[name])
        for line, color in self._levels.values():
            shown = t.curve(color)
            line.setPen(pg.mkPen(shown, width=1, style=Qt.PenStyle.DashLine))
            line.label.setColor(shown)

    # ------------------------------------------------------------------ readings (what the views show)
    @property
    def legend(self) -> pg.LegendItem:
        """The legend: one entry per curve, in the theme's colours, moved off the curves."""
        return self._legend

    @property
    def legend_corner(self) -> tuple[bool, bool | None]:
        """Where the legend sits: (at the right, at the top); None for top: not placed yet."""
        return self._legend_corner

    @property
    def readout(self) -> pg.TextItem:
        """The crosshair's value readout."""
        return self._readout

    @property
    def crosshair(self) -> pg.InfiniteLine:
        """The crosshair's vertical line (shown while the pointer is over the plot)."""
        return self._vline

    def curve(self, name: str) -> pg.PlotDataItem:
        """The drawn curve ``name``."""
        return self._items[name]

    def set_title(self, title: str) -> None:
        """Change the title (in the theme's text colour)."""
        self.getPlotItem().setTitle(title, color=self.theme.text)

    # ------------------------------------------------------------------ curves
    def add_curve(self, name: str, color: str | None = None, *, dashed: bool = False,
                  symbols: bool = False) -> None:
        """Declare a curve (idempotent); ``symbols`` marks each point, for sparse per-epoch data."""
        if name in self._items:
            return
        color = color or PALETTE[len(self._items) % len(PALETTE)]
        kwargs = {"symbol": "o", "symbolSize": 5, "symbolPen": None} if symbols else {}
        item = self.getPlotItem().plot(name=name, **kwargs)
        self._style_curve(item, color, dashed, symbols)
        self._items[name] = item
        self._styles[name] = (color, dashed, symbols)
        self._buffers[name] = SeriesBuffer()

    def set_level(self, name: str, y: float | None, label: str = "", color: str = "#D55E00", tip: str = "") -> None:
        """A dashed horizontal line at ``y`` labelled ``label`` (a predicted peak, say; ``tip``: its label's
        tooltip), kept in view; ``y`` None removes it."""
        old = self._levels.pop(name, None)
        if old is not None:
            self.getPlotItem().removeItem(old[0])
        self._y_spans.pop(f"level:{name}", None)
        if y is not None and np.isfinite(y):
            line = LevelLine(float(y), label, self.theme.curve(color), tip)
            self.getPlotItem().addItem(line)
            self._levels[name] = (line, color)
            self._y_spans[f"level:{name}"] = (float(y), float(y))
        self._fit_flat_data()

    def level(self, name: str) -> LevelLine | None:
        """The level line ``name``, or None."""
        entry = self._levels.get(name)
        return entry[0] if entry else None

    def _style_curve(self, item: pg.PlotDataItem, color: str, dashed: bool, symbols: bool) -> None:
        shown = self.theme.curve(color)
        item.setPen(pg.mkPen(shown, width=self.PEN_WIDTH,
                             style=Qt.PenStyle.DashLine if dashed else Qt.PenStyle.SolidLine))
        if symbols:
            item.setSymbolBrush(shown)

    def curve_color(self, name: str) -> str:
        """The colour curve ``name`` is drawn in now (``#rrggbb``, after the theme's mapping)."""
        return self._items[name].opts["pen"].color().name()

    def append(self, name: str, xs: Iterable[float], ys: Iterable[float]) -> None:
        """Buffer points for ``name`` (declaring the curve on first use); drawn on refresh()."""
        if name not in self._items:
            self.add_curve(name)
        self._buffers[name].extend(_floats(xs), _floats(ys))
        self._dirty.add(name)

    def refresh(self) -> None:
        """Push the buffered points of changed curves to pyqtgraph (one redraw per burst)."""
        for name in self._dirty:
            self._draw(name)
        if self._dirty:
            self._fit_flat_data()
            # Settle the view before the paint, here: pyqtgraph would otherwise find the new range
            # while painting (auto-range, clip-to-view, the new view transform, whose changed bounds
            # ask for auto-range again) and paint the plot a second time.
            vb = self.getPlotItem().vb
            vb.prepareForPaint()
            vb.prepareForPaint()
            self._place_legend()
        self._dirty.clear()

    # places in order of preference: (right, top); top None is half-way up an edge (between curves at the
    # top and a level line at the bottom, say)
    _CORNERS = ((True, True), (True, False), (False, True), (False, False), (True, None), (False, None))

    def _place_legend(self) -> None:
        """Put the legend in the corner of the view where it covers the fewest drawn points (the
        one it is in, on a tie), so it does not hide the curves' newest part."""
        vb = self.getPlotItem().vb
        width, height = vb.width(), vb.height()
        box = self._legend.boundingRect()
        if width <= 0 or height <= 0 or box.width() <= 0 or not self._items:
            return
        (x0, x1), (y0, y1) = vb.viewRange()
        fx, fy = min((box.width() + 16) / width, 1.0), min((box.height() + 16) / height, 1.0)
        curves = [(x, y) for x, y in (item.getData() for item in self._items.values())
                  if x is not None and y is not None and len(x) > 0]

        def covered(right: bool, top: bool | None) -> int:
            lo_x, hi_x = (x1 - fx * (x1 - x0), x1) if right else (x0, x0 + fx * (x1 - x0))
            mid = (y0 + y1) / 2
            half = min((box.height() + 4) / height, 1.0) * (y1 - y0) / 2   # half-way: no edge margin to keep
            lo_y, hi_y = (y1 - fy * (y1 - y0), y1) if top else (y0, y0 + fy * (y1 - y0)) if top is False else (
                mid - half, mid + half)
            count = 0
            for xs, ys in curves:   # the lines between points too, sampled across the corner
                ok = np.isfinite(xs) & np.isfinite(ys)
                xs, ys = xs[ok], ys[ok]
                if xs.size == 0:
                    continue
                at = np.linspace(max(lo_x, xs[0]), min(hi_x, xs[-1]), 48)
                inside = (xs >= lo_x) & (xs <= hi_x) & (ys >= lo_y) & (ys <= hi_y)
                line = np.interp(at, xs, ys) if at[0] <= at[-1] else np.zeros(0)
                count += int(np.count_nonzero(inside)) + int(np.count_nonzero((line >= lo_y) & (line <= hi_y)))
            return count + levels(lo_x, hi_x, lo_y, hi_y)

        def levels(lo_x: float, hi_x: float, lo_y: float, hi_y: float) -> int:
            """Level lines (a predicted peak) cross the whole view, their label at the left above them:
            a corner over a line counts as over a curve, over a label as over much more."""
            count = 0
            for line, _color in self._levels.values():
                y = line.value()
                count += 48 if lo_y <= y <= hi_y else 0
                label = line.label.boundingRect() if getattr(line, "label", None) is not None else QRectF()
                lx0 = x0 + 0.03 * (x1 - x0)
                lx1 = lx0 + label.width() * (x1 - x0) / width
                ly1 = y + label.height() * (y1 - y0) / height
                if label.width() > 0 and lx0 < hi_x and lx1 > lo_x and y < hi_y and ly1 > lo_y:
                    count += 200
            return count

        now = self._legend_corner
        best = min(self._CORNERS, key=lambda c: (covered(*c), c != now))
        if best != now:
            self.set_legend_corner(*best)

    def set_legend_corner(self, right: bool, top: bool | None) -> None:
        """Anchor the legend in a corner of the view, or half-way up its left or right edge (``top``
        None); the crosshair readout takes the other edge (the top, for a legend half-way)."""
        self._legend_corner = (right, top)
        self._legend_top = bool(top)
        ix, iy = (1 if right else 0), (0 if top else 1 if top is False else 0.5)
        dy = 8 if top else -8 if top is False else 0
        self._legend.anchor(itemPos=(ix, iy), parentPos=(ix, iy), offset=(-8 if right else 8, dy))

    def _draw(self, name: str) -> None:
        """Give pyqtgraph the decimated points of ``name`` for the x range in view (all of it while
        the x axis follows the data)."""
        x0, x1 = self._window()
        target = 2 * max(int(self.getPlotItem().vb.width()), 200)   # a min and a max per pixel
        xs, ys = self._buffers[name].decimated(x0, x1, target)
        item, finite = self._items[name], ys[np.isfinite(ys)]
        if not self._styles[name][2]:   # a line of one point draws nothing: a run's first sample is a dot
            lone = finite.size == 1
            item.setSymbol("o" if lone else None)
            if lone:
                item.setSymbolSize(6)
                item.setSymbolPen(None)
                item.setSymbolBrush(item.opts["pen"].color())
        item.setData(xs, ys)
        self._shown = (x0, x1)
        if finite.size:
            self._y_spans[name] = (float(finite.min()), float(finite.max()))
        else:
            self._y_spans.pop(name, None)

    def _fit_flat_data(self) -> None:
        """Give a flat series (a constant learning rate, a steady throughput) a y range of +-10% about its
        value: pyqtgraph would show +-0.5 about it, where a learning rate of 0.003 reads as 0."""
        spans = self._y_spans.values()
        want = None
        if spans:
            lo, hi = min(s[0] for s in spans), max(s[1] for s in spans)
            size = max(abs(lo), abs(hi))
            if hi - lo <= 1e-9 * size or size == 0:
                want = 0.2 * size if size else 1.0
        if want != self._min_y_range:
            self._min_y_range = want
            self.getPlotItem().vb.setLimits(minYRange=want, maxYRange=want)

    def _window(self) -> tuple[float, float]:
        vb = self.getPlotItem().vb
        if vb.autoRangeEnabled()[0]:
            return -np.inf, np.inf
        (x0, x1), _ = vb.viewRange()
        return x0, x1

    def _on_view_changed(self, *_args: object) -> None:
        """A zoom, a pan, or the x axis set to follow the data again: draw what is now in view."""
        if self._items and self._window() != self._shown:
            for name in self._items:
                self._draw(name)
            self._fit_flat_data()

    def clear_curves(self) -> None:
        for item in self._items.values():
            self.getPlotItem().removeItem(item)
        self._legend.clear()
        self._items.clear()
        self._styles.clear()
        self._buffers.clear()
        self._dirty.clear()
        self._y_spans.clear()
        for line, _ in self._levels.values():
            self.getPlotItem().removeItem(line)
        self._levels.clear()
        self._fit_flat_data()
        vb = self.getPlotItem().vb       # nor with its axes: a new run's plots showed steps 0-500, empty
        vb.setRange(xRange=(0, 1), yRange=(0, 1), padding=0)
        vb.enableAutoRange()
        self.hide_readout()     # a new run starts without the last run's crosshair

    def curve_names(self) -> list[str]:
        return list(self._items)

    def buffer(self, name: str) -> SeriesBuffer:
        return self._buffers[name]

    def point_count(self) -> int:
        return sum(len(b) for b in self._buffers.values())

    # --------------------------------------------------------------- crosshair
    def _setup_crosshair(self) -> None:
        self._vline = pg.InfiniteLine(angle=90, movable=False)
        self._vline.setVisible(False)
        self.getPlotItem().addItem(self._vline, ignoreBounds=True)
        self._readout = pg.TextItem("", anchor=(0, 0))
        self._readout.setFont(QFont("Sans Serif", 8))
        self._readout.setZValue(100)
        self._readout.setVisible(False)
        self.getPlotItem().addItem(self._readout, ignoreBounds=True)
        self._proxy = pg.SignalProxy(self.scene().sigMouseMoved, rateLimit=30, slot=self._on_mouse)

    def _on_mouse(self, args: tuple) -> None:
        pos = args[0]
        vb = self.getPlotItem().vb
        if not self.getPlotItem().sceneBoundingRect().contains(pos) or not self._items:
            self.hide_readout()
            return
        self.show_readout(vb.mapSceneToView(pos).x())

    def leaveEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt override)
        """The mouse left the plot: no mouse move says so, so the crosshair would stay."""
        super().leaveEvent(event)
        self.hide_readout()

    def hide_readout(self) -> None:
        self._readout.setText("")
        self._vline.setVisible(False)
        self._readout.setVisible(False)

    def show_readout(self, x: float) -> str:
        """Place the crosshair at ``x`` and show each curve's nearest y; returns the text."""
        text = self.readout_at(x)
        self._vline.setPos(x)
        self._vline.setVisible(True)
        (x0, x1), (y0, y1) = self.getPlotItem().vb.viewRange()
        self._readout.setText(text)
        left = x < (x0 + x1) / 2
        # Beside the line, at the edge the legend is not on: near the right end it would cover it.
        self._readout.setAnchor((0 if left else 1, 1 if self._legend_top else 0))
        self._readout.setPos(QPointF(x, y0 if self._legend_top else y1))
        self._readout.setVisible(bool(text))
        return text

    def readout_at(self, x: float) -> str:
        lines = [f"x = {x:.0f}"]
        for name, buf in self._buffers.items():
            y = buf.y_at(x)
            if y is not None:
                lines.append(f"{name}: {format_value(y)}")
        return "\n".join(lines) if len(lines) > 1 else ""
