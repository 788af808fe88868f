"""The heat overlay on the design canvas: each node haloed in the colour of one metric, with a legend.

The metrics come from the autograd capture (saved bytes, before training) and from the latest live
inspection (gradient norms, update ratio, dead fraction, backward time). Norms span orders of
magnitude, so they are coloured on a log scale; fractions on a linear one. The halo is a child of
the node's item drawn behind it: it moves with the node and never hides its text.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QEvent, QObject, QPoint, QRect, QRectF, Qt
from PySide6.QtGui import QColor, QLinearGradient, QPainter, QPalette, QPen
from PySide6.QtWidgets import QGraphicsItem, QStyleOptionGraphicsItem, QWidget

from graph_editor.model.units import nbytes
from graph_editor.ui.canvas import GraphCanvas

# A perceptually ordered dark-blue -> teal -> yellow -> orange -> red ramp (readable on both themes).
STOPS = ((0.0, "#3b4cc0"), (0.3, "#2a9d8f"), (0.6, "#e9c46a"), (0.8, "#f4a261"), (1.0, "#d62828"))
HALO = 7.0


@dataclass(frozen=True)
class Metric:
    key: str          # the figure's name in a report, or 'saved_bytes' from the capture
    label: str
    log: bool         # coloured on a log scale
    unit: str = ""    # 'B' for bytes, 's' for seconds
    combine: str = "max"  # how a collapsed block shows its members: 'sum', 'max' or 'mean'

    def format(self, value: float) -> str:
        if self.unit == "B":
            return nbytes(value)
        if self.unit == "s":
            return f"{value * 1e3:.2f} ms"
        if not self.log:
            return f"{value:.0%}"
        return f"{value:.3g}"


METRICS = (
    Metric("saved_bytes", "Saved for backward", True, "B", "sum"),
    Metric("grad_out", "||dL/dy|| (output gradient)", True),
    Metric("grad_w", "||dL/dW|| (weight gradient)", True),
    Metric("update_ratio", "Update / weight ratio", True),
    Metric("zero_fraction", "Dead fraction (exact zeros)", False, "", "mean"),
    Metric("backward_s", "Backward time (CPU)", True, "s", "sum"),
)
METRIC_BY_KEY = {m.key: m for m in METRICS}


def color_at(t: float) -> QColor:
    """The ramp's colour at ``t`` in [0, 1]."""
    t = min(max(t, 0.0), 1.0)
    for (t0, c0), (t1, c1) in zip(STOPS, STOPS[1:], strict=False):
        if t <= t1:
            a, b, f = QColor(c0), QColor(c1), (t - t0) / (t1 - t0)
            return QColor.fromRgbF(a.redF() + (b.redF() - a.redF()) * f, a.greenF() + (b.greenF() - a.greenF()) * f,
                                   a.blueF() + (b.blueF() - a.blueF()) * f)
    return QColor(STOPS[-1][1])


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


# How a collapsed block's members' values make the block's one value, by Metric.combine
COMBINE: dict[str, Callable[[list[float]], float]] = {"sum": sum, "max": max, "mean": _mean}


class Scale:
    """Values -> [0, 1] over their own range (log10 for log metrics; non-positive values at 0)."""

    def __init__(self, metric: Metric, values: dict[str, float]) -> None:
        self.metric = metric
        usable = [x for v in values.values() if (x := self._x(v)) is not None]
        self.lo, self.hi = (min(usable), max(usable)) if usable else (0.0, 1.0)
        self.vmin = min(values.values()) if values else 0.0
        self.vmax = max(values.values()) if values else 0.0

    def _x(self, v: float) -> float | None:
        if not math.isfinite(v):
            return None
        if self.metric.log:
            return math.log10(v) if v > 0 else None
        return v

    def __call__(self, v: float) -> float:
        x = self._x(v)
        if x is None:
            return 1.0 if v == math.inf else 0.0
        return 0.5 if self.hi <= self.lo else (x - self.lo) / (self.hi - self.lo)


class HaloItem(QGraphicsItem):
    """A coloured rounded frame behind one node item, with its value in a tag above the node."""

    def __init__(self, parent: QGraphicsItem, color: QColor, text: str) -> None:
        super().__init__(parent)
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemStacksBehindParent)
        self.setAcceptedMouseButtons(Qt.MouseButton.NoButton)
        self.color, self.text = color, text
        node = parent.shape().boundingRect()
        self.node = node
        self._rect = node.adjusted(-HALO, -HALO - 16, HALO, HALO)

    def boundingRect(self) -> QRectF:
        return self._rect

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget: QWidget | None = None) -> None:
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(self.color)
        painter.drawRoundedRect(self.node.adjusted(-HALO, -HALO, HALO, HALO), 9, 9)
        tag = QRectF(self.node.right() - 86, self.node.top() - HALO - 16, 86, 16)
        painter.drawRoundedRect(tag, 4, 4)
        painter.setPen(QColor("#101010") if self.color.lightnessF() > 0.55 else QColor("#ffffff"))
        painter.drawText(tag, Qt.AlignmentFlag.AlignCenter, self.text)


class Legend(QWidget):
    """The metric's name, the colour ramp and its range, in a corner of the canvas."""

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        self.title, self.low, self.high = "", "", ""
        self.avoid: QWidget | None = None    # the canvas's minimap, which shares the bottom-right corner
        self.resize(250, 58)
        self.hide()

    def set_range(self, title: str, low: str, high: str) -> None:
        self.title, self.low, self.high = title, low, high
        self.update()

    def corner(self) -> QPoint:
        """Bottom right of the canvas's viewport, where a left-to-right graph leaves room; left of the
        canvas's minimap when it shows there (or above it, on a viewport too narrow for both)."""
        parent = self.parentWidget()
        if parent is None:
            return self.pos()
        x, y = parent.width() - self.width() - 12, parent.height() - self.height() - 12
        beside = self.avoid if self.avoid is not None and self.avoid.isVisible() else None
        if beside is not None and (home := beside.parentWidget()) is not None:
            other = QRect(parent.mapFrom(home, beside.pos()), beside.size())
            if other.left() - self.width() - 12 >= 0:
                x = other.left() - self.width() - 12
            else:
                y = other.top() - self.height() - 12
        return QPoint(x, y)

    def paintEvent(self, _event: object) -> None:
        if self.pos() != self.corner():   # the viewport was resized unseen (the workspaces move docks): follow
            self.move(self.corner())
            return
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        p.setPen(QPen(QColor(128, 128, 128, 160)))
        pal = self.palette()            # the theme's: a dark box stayed dark in the light theme
        back = QColor(pal.color(QPalette.ColorRole.Window))
        back.setAlpha(225)
        p.setBrush(back)
        p.drawRoundedRect(QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5), 6, 6)
        p.setPen(pal.color(QPalette.ColorRole.WindowText))
        p.drawText(QRectF(10, 4, self.width() - 20, 18), Qt.AlignmentFlag.AlignVCenter, self.title)
        bar = QRectF(10, 24, self.width() - 20, 10)
        grad = QLinearGradient(bar.topLeft(), bar.topRight())
        for t, c in STOPS:
            grad.setColorAt(t, QColor(c))
        p.fillRect(bar, grad)
        p.setPen(pal.color(QPalette.ColorRole.WindowText))
        p.drawText(QRectF(10, 36, bar.width() / 2, 18), Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                   self.low)
        p.drawText(QRectF(10 + bar.width() / 2, 36, bar.width() / 2, 18),
                   Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, self.high)


class HeatOverlay:
    """Halos on the design canvas's nodes for one metric; ``show(metric, values)`` or ``clear()``."""

    def __init__(self, canvas: GraphCanvas) -> None:
        self.canvas = canvas
        self.legend = Legend(canvas.viewport())
        self.legend.avoid = canvas.minimap
        self._follow = _ResizeFollower(canvas, self._place_legend)
        self._follow_map = _ResizeFollower(canvas.minimap, self._place_legend)   # it shows and hides as one pans
        self.halos: dict[str, HaloItem] = {}
        self.metric: Metric | None = None
        self.values: dict[str, float] = {}

    def show(self, metric: Metric, values: dict[str, float]) -> None:
        """Colour every node that has a value (a collapsed block by its members' values combined);
        nodes without one keep no halo."""
        self.clear()
        self.metric, self.values = metric, dict(values)
        shown = self._shown(metric, values)
        scale = Scale(metric, {key: v for key, (_, v) in shown.items()})
        for key, (item, value) in shown.items():
            color = color_at(scale(value))
            color.setAlpha(215)
            self.halos[key] = HaloItem(item, color, metric.format(value))
        if values:
            self.legend.set_range(metric.label, metric.format(scale.vmin), metric.format(scale.vmax))
            self._place_legend()
            self.legend.show()
            self.legend.raise_()

    def _shown(self, metric: Metric, values: dict[str, float]) -> dict[str, tuple[QGraphicsItem, float]]:
        """The canvas items that show ``values``: a node's own item, or the collapsed block it hides in."""
        scene = self.canvas.graph_scene
        members: dict[str, tuple[QGraphicsItem, list[float]]] = {}
        for node_id, value in values.items():
            owner = scene.collapsed_owner(node_id)
            item = scene.boxes.get(owner) if owner is not None else scene.item_for(node_id)
            if item is not None:
                members.setdefault(owner or node_id, (item, []))[1].append(value)
        combine = COMBINE[metric.combine]
        return {key: (item, float(combine(vs))) for key, (item, vs) in members.items()}

    def clear(self) -> None:
        scene = self.canvas.graph_scene
        for halo in self.halos.values():
            if _alive(halo) and halo.scene() is scene:
                scene.removeItem(halo)
        self.halos.clear()
        self.legend.hide()
        self.metric, self.values = None, {}

    def _place_legend(self) -> None:
        """Bottom right, where a left-to-right graph leaves room (beside the minimap, if shown)."""
        self.legend.move(self.legend.corner())


class _ResizeFollower(QObject):
    """Calls ``then`` after ``widget`` was resized, moved, shown or hidden (the legend keeps to its corner
    as docks move, and out of the minimap's way); a hidden canvas resizes unseen."""

    def __init__(self, widget: QWidget, then: Callable[[], None]) -> None:
        super().__init__(widget)
        self.then = then
        widget.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() in (QEvent.Type.Resize, QEvent.Type.Show, QEvent.Type.Hide, QEvent.Type.Move):
            self.then()
        return False


def _alive(item: QGraphicsItem) -> bool:
    import shiboken6

    return shiboken6.isValid(item)

