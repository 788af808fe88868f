"""Where the studio's data lives (icons, themes, templates) and how icons are drawn.

Icons are single-colour SVGs drawn with ``currentColor``; :class:`IconSet` paints them in
the theme's text colour so one file serves the dark and the light theme.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QByteArray, QSize
from PySide6.QtGui import QColor, QIcon, QPainter, QPixmap
from PySide6.QtSvg import QSvgRenderer

ASSETS = Path(__file__).resolve().parents[1] / "assets"
ICONS = ASSETS / "icons"
THEMES = ASSETS / "themes"
TEMPLATES = ASSETS / "templates"


def template_paths(folder: Path = TEMPLATES) -> list[Path]:
    """Every ``*.graph.json`` template, sorted by file name."""
    return sorted(folder.glob("*.graph.json"))


class IconSet:
    """Icons from ``assets/icons`` painted in one colour, cached until the colour changes."""

    def __init__(self, folder: Path = ICONS, color: str = "#d8dee9") -> None:
        self.folder = folder
        self._color = color
        self._cache: dict[tuple[str, str], QIcon] = {}

    @property
    def color(self) -> str:
        return self._color

    def set_color(self, color: str) -> None:
        if color != self._color:
            self._color = color
            self._cache.clear()

    def icon(self, name: str, color: str | None = None) -> QIcon:
        """The icon ``name`` (file stem) in the theme's colour, or in ``color`` (an error's red);
        an empty icon when there is no such file."""
        key = (name, color or self._color)
        if key not in self._cache:
            self._cache[key] = self._load(*key)
        return self._cache[key]

    def _load(self, name: str, color: str) -> QIcon:
        path = self.folder / f"{name}.svg"
        if not path.is_file():
            return QIcon()
        svg = path.read_text(encoding="utf-8").replace("currentColor", color)
        renderer = QSvgRenderer(QByteArray(svg.encode("utf-8")))
        icon = QIcon()
        for size in (16, 24, 32, 48):
            pixmap = QPixmap(QSize(size, size))
            pixmap.fill(QColor(0, 0, 0, 0))
            painter = QPainter(pixmap)
            renderer.render(painter)
            painter.end()
            icon.addPixmap(pixmap)
        return icon
