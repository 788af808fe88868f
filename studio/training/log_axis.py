"""A y axis whose log-scale labels never crowd: pyqtgraph labels every tick from 2 to 9 of a decade when
the view spans less than about three decades, and those ticks close up towards the next decade (0.8, 0.9
and 1 sit 5% of a decade apart: their labels ran into each other on a short plot). Here a tick keeps its
label only where it stands clear of those kept before it, in the order 1 (the decades), 5, 2, 3, then
the rest; its grid line stays either way. Linear axes are pyqtgraph's own."""

from __future__ import annotations

import math
from typing import Any

import pyqtgraph as pg
from PySide6.QtGui import QFont, QFontMetricsF

PRIORITY = (1, 5, 2, 3, 4, 6, 7, 8, 9)   # which mantissas keep their labels first
GAP = 1.6                                  # labels at least this many text lines apart


class LogLabelAxis(pg.AxisItem):
    """``pg.AxisItem`` with log-mode labels thinned to what fits (see the module's text)."""

    def __init__(self, orientation: str, **kwargs: Any) -> None:
        super().__init__(orientation, **kwargs)
        self._view: tuple[float, float, float] = (0.0, 1.0, 1.0)   # log10 low, log10 high, length in pixels

    def logTickValues(self, minVal: float, maxVal: float, size: float, stdTicks: Any) -> Any:  # noqa: N802, N803
        self._view = (minVal, maxVal, size)
        return super().logTickValues(minVal, maxVal, size, stdTicks)

    def logTickStrings(self, values: list[float], scale: float, spacing: float | None) -> list[str]:  # noqa: N802
        strings: list[str] = super().logTickStrings(values, scale, spacing)
        if spacing is not None or not values:     # decades (their own level): pyqtgraph spaces them evenly
            return strings
        return [s if keep else "" for s, keep in zip(strings, self.labelled(values), strict=True)]

    def labelled(self, values: list[float]) -> list[bool]:
        """Which of the log10 tick ``values`` keep a label on this axis's length."""
        low, high, size = self._view
        per_decade = size / (high - low) if high > low else 0.0
        font = self.style.get("tickFont") or QFont()
        room = GAP * QFontMetricsF(font).height()
        kept: list[float] = []

        def rank(i: int) -> int:
            mantissa = round(10 ** (values[i] - math.floor(values[i] + 1e-9)))
            return PRIORITY.index(mantissa) if mantissa in PRIORITY else len(PRIORITY)

        keep = [False] * len(values)
        for i in sorted(range(len(values)), key=rank):
            if all(abs(values[i] - k) * per_decade >= room for k in kept):
                kept.append(values[i])
                keep[i] = True
        return keep
