"""What the graph's items read from the scene they paint in: its theme, fonts and font metrics
(:class:`SceneLook`, which :class:`~graph_editor.ui.scene.GraphScene` provides), so the node, wire
and group items need no import of the scene that makes them."""

from __future__ import annotations

from typing import Protocol

from PySide6.QtCore import Qt
from PySide6.QtGui import QFontMetricsF

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
        self.title = QFontMetricsF(fonts.title)
        self.body = QFontMetricsF(fonts.body)
        self.small = QFontMetricsF(fonts.small)
        self.mono = QFontMetricsF(fonts.mono)
        self._elided: dict[tuple, str] = {}
        self._advance: dict[tuple[str, str], float] = {}

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
