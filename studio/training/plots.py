"""Live curve plots for the training dashboard.

A :class:`SeriesBuffer` keeps one curve's points in preallocated NumPy arrays that double when
full, so appending a point never reallocates per event. A :class:`CurvePlot` draws several
buffers with pyqtgraph's peak downsampling and clip-to-view (a million points stay smooth) and
shows a crosshair readout: the x under the mouse and every curve's y there. Points are only
pushed to pyqtgraph by :meth:`CurvePlot.refresh`, which the dashboard calls from a ~10 Hz timer,
so a burst of events costs one redraw. Colours come from a
:class:`~studio.training.plot_theme.PlotTheme` (light or dark) and change live with
:meth:`CurvePlot.set_plot_theme`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QWidget

from .plot_theme import LIGHT, PALETTE, PlotTheme, plot_theme


class SeriesBuffer:
    """Growing x/y arrays for one curve; ``x`` and ``y`` are views of the filled part."""

    def __init__(self, capacity: int = 1024) -> None:
        self._x = np.empty(max(capacity, 16), dtype=np.float64)
        self._y = np.empty(max(capacity, 16), dtype=np.float64)
        self._n = 0

    def __len__(self) -> int:
        return self._n

    @property
    def x(self) -> np.ndarray:
        return self._x[: self._n]

    @property
    def y(self) -> np.ndarray:
        return self._y[: self._n]

    def extend(self, xs: Sequence[float] | np.ndarray, ys: Sequence[float] | np.ndarray) -> None:
        """Append points; arrays double in size when full (amortised O(1) per point)."""
        xs = np.asarray(xs, dtype=np.float64).ravel()
        ys = np.asarray(ys, dtype=np.float64).ravel()
        if xs.shape != ys.shape:
            raise ValueError(f"x and y differ in length: {xs.size} vs {ys.size}")
        need = self._n + xs.size
        if need > self._x.size:
            cap = self._x.size
            while cap < need:
                cap *= 2
            self._x = _grown(self._x, self._n, cap)
            self._y = _grown(self._y, self._n, cap)
        self._x[self._n:need] = xs
        self._y[self._n:need] = ys
        self._n = need

    def append(self, x: float, y: float) -> None:
        self.extend((x,), (y,))

    def clear(self) -> None:
        self._n = 0

    def y_at(self, x: float) -> float | None:
        """The y of the point nearest to ``x`` (x is assumed non-decreasing), None when empty."""
        if self._n == 0:
            return None
        xs = self.x
        i = int(np.searchsorted(xs, x))
        if i >= self._n:
            i = self._n - 1
        elif i > 0 and abs(xs[i - 1] - x) <= abs(xs[i] - x):
            i -= 1
        return float(self._y[i])


def _grown(a: np.ndarray, filled: int, capacity: int) -> np.ndarray:
    """A larger array holding ``a``'s first ``filled`` values (np.resize would tile the old values
    into the new space: ten times slower for a million points)."""
    out = np.empty(capacity, dtype=a.dtype)
    out[:filled] = a[:filled]
    return out


def _floats(values: Iterable[float]) -> np.ndarray:
    """An array as it is (a long run's history arrives as arrays), any other iterable read once."""
    return values if isinstance(values, np.ndarray) else np.fromiter(values, float)


def format_value(v: float) -> str:
    """Compact number for readouts: 4 significant digits, scientific when tiny or huge."""
    if v == 0 or 1e-3 <= abs(v) < 1e6:
        return f"{v:.4g}"
    return f"{v:.3e}"


class CurvePlot(pg.PlotWidget):
    """A titled plot of named curves fed from :class:`SeriesBuffer`s, with a crosshair.

    ``theme`` ("light", "dark" or a :class:`PlotTheme`) colours it; :meth:`set_plot_theme`
    switches live. Curve colours are asked for as palette colours and shown as the theme maps them.
    """

    # Qt's raster engine draws 1-pixel lines on a fast path; 2-pixel ones cost ~5x more per paint.
    PEN_WIDTH = 1

    def __init__(self, title: str, y_label: str = "", x_label: str = "step", *,
                 legend: str = "top", theme: str | PlotTheme = LIGHT, parent: QWidget | None = None) -> None:
        super().__init__(parent=parent)
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
        self._buffers: dict[str, SeriesBuffer] = {}
        self._items: dict[str, pg.PlotDataItem] = {}
        self._styles: dict[str, tuple[str, bool, bool]] = {}  # name -> (palette colour, dashed, symbols)
        self._dirty: set[str] = set()
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
        item.setDownsampling(auto=True, method="peak")
        item.setClipToView(True)
        self._items[name] = item
        self._styles[name] = (color, dashed, symbols)
        self._buffers[name] = SeriesBuffer()

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
            buf = self._buffers[name]
            self._items[name].setData(buf.x, buf.y)
        if self._dirty:
            # Settle the view before the paint, here: pyqtgraph would otherwise find the new range
            # while painting (auto-range, clip-to-view, the new view transform, whose changed bounds
            # ask for auto-range again) and paint the plot a second time.
            vb = self.getPlotItem().vb
            vb.prepareForPaint()
            vb.prepareForPaint()
        self._dirty.clear()

    def clear_curves(self) -> None:
        for item in self._items.values():
            self.getPlotItem().removeItem(item)
        self._legend.clear()
        self._items.clear()
        self._styles.clear()
        self._buffers.clear()
        self._dirty.clear()
        self._readout.setText("")

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
            self._vline.setVisible(False)
            self._readout.setVisible(False)
            return
        self.show_readout(vb.mapSceneToView(pos).x())

    def show_readout(self, x: float) -> str:
        """Place the crosshair at ``x`` and show each curve's nearest y; returns the text."""
        text = self.readout_at(x)
        self._vline.setPos(x)
        self._vline.setVisible(True)
        (x0, x1), (y0, y1) = self.getPlotItem().vb.viewRange()
        self._readout.setText(text)
        left = x < (x0 + x1) / 2
        self._readout.setAnchor((0, 0) if left else (1, 0))
        self._readout.setPos(QPointF(x, y1))
        self._readout.setVisible(bool(text))
        return text

    def readout_at(self, x: float) -> str:
        lines = [f"x = {x:.0f}"]
        for name, buf in self._buffers.items():
            y = buf.y_at(x)
            if y is not None:
                lines.append(f"{name}: {format_value(y)}")
        return "\n".join(lines) if len(lines) > 1 else ""
