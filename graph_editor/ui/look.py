"""What the graph's items read from the scene they paint in: its theme, fonts and font metrics
(:class:`SceneLook`, which :class:`~graph_editor.ui.scene.GraphScene` provides), so the node, wire
and group items need no import of the scene that makes them."""

from __future__ import annotations

from typing import Protocol

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QFontMetricsF

from .style import Fonts, Theme


class SceneLook(Protocol):
    """The scene as its items see it while painting."""

    theme: Theme
    fonts: Fonts
    metrics: Metrics


class Metrics:
    """Font metrics of the canvas fonts, with elided texts remembered (items repaint often,
    their texts rarely change)."""

    def __init__(self, fonts: Fonts) -> None:
        self._fonts = fonts
        self.title = QFontMetricsF(fonts.title)
        self.body = QFontMetricsF(fonts.body)
        self.small = QFontMetricsF(fonts.small)
        self.mono = QFontMetricsF(fonts.mono)
        self._elided: dict[tuple, str] = {}
        self._advance: dict[tuple[str, str], float] = {}
        self._fitted: dict[tuple[str, str, float, float], tuple[QFont, str]] = {}

    def elide(self, font: str, text: str, mode: Qt.TextElideMode, width: float) -> str:
        key = (font, text, mode, width)
        found = self._elided.get(key)
        if found is None:
            if len(self._elided) > 20000:
                self._elided.clear()
            found = self._elided[key] = getattr(self, font).elidedText(text, mode, width)
        return found

    def advance(self, font: str, text: str) -> float:
        key = (font, text)
        found = self._advance.get(key)
        if found is None:
            found = self._advance[key] = getattr(self, font).horizontalAdvance(text)
        return found

    def fitted(self, font: str, text: str, width: float, height: float, least: float = 0.75) -> tuple[QFont, str]:
        """``text`` in ``font`` made smaller until it fits a ``width`` x ``height`` box, down to ``least`` of its
        size: on one line, else on two split at the space nearest its middle, else elided in the middle. A
        node's title such as "AdaptiveAvgPool2d" or "Scaled Dot-Product Attention" is read whole in a
        slightly smaller font, not cut to "AdaptiveAvgPool..."."""
        key = (font, text, width, height)
        found = self._fitted.get(key)
        if found is None:
            base: QFont = getattr(self._fonts, font)
            found = (base, text) if self.advance(font, text) <= width else _fit(base, text, width, height, least)
            if len(self._fitted) > 20000:
                self._fitted.clear()
            self._fitted[key] = found
        return found


def _fit(base: QFont, text: str, width: float, height: float, least: float) -> tuple[QFont, str]:
    spaces = [i for i, c in enumerate(text) if c == " "]
    split = min(spaces, key=lambda i: abs(2 * i - len(text)), default=None)
    layouts = [[text]] + ([[text[:split], text[split + 1:]]] if split is not None else [])
    size = base.pointSizeF()
    for lines in layouts:
        font = QFont(base)
        points = size
        while points >= size * least:   # font sizes are not quite linear in width (hinting): measure each
            font.setPointSizeF(points)
            metrics = QFontMetricsF(font)
            if (max(metrics.horizontalAdvance(line) for line in lines) <= width
                    and metrics.height() * len(lines) <= height):
                return font, "\n".join(lines)
            points -= 0.25
    font = QFont(base)
    font.setPointSizeF(size * least)
    return font, QFontMetricsF(font).elidedText(text, Qt.TextElideMode.ElideMiddle, width)
