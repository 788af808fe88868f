"""Colours and fonts of the canvas: a dark and a light theme the shell can switch.

A :class:`Theme` is plain data; the scene holds the current one and its items read it when
they paint, so switching theme is ``canvas.set_theme("light")`` and one repaint.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from PySide6.QtGui import QColor, QFont

CATEGORY_HUES = {  # title-bar colours per palette category (hue, saturation)
    "Input / Output": (140, 110),
    "Core": (215, 120),
    "Convolution": (200, 150),
    "Normalisation": (265, 90),
    "Activation": (30, 150),
    "Pooling": (175, 120),
    "Regularisation": (330, 70),
    "Shape": (50, 110),
    "Merge": (95, 80),
    "Transformer": (285, 120),
}


@lru_cache(maxsize=256)
def _hsl(hue: int, saturation: int, lightness: int) -> QColor:
    return QColor.fromHsl(hue, saturation, lightness)


@dataclass(frozen=True)
class Theme:
    """Every colour the canvas paints with."""

    name: str
    background: QColor
    grid_minor: QColor
    grid_major: QColor
    node_body: QColor
    node_border: QColor
    selected: QColor
    title_text: QColor
    text: QColor
    text_dim: QColor
    shape_text: QColor
    wire: QColor
    wire_label_bg: QColor
    port_fill: QColor
    port_ring: QColor
    error: QColor
    error_body: QColor
    warning: QColor
    group_fill: QColor
    group_border: QColor
    ok: QColor
    title_lightness: int
    minimap_bg: QColor = field(default_factory=lambda: QColor(0, 0, 0, 150))
    minimap_view: QColor = field(default_factory=lambda: QColor(255, 255, 255, 170))

    def category_color(self, category: str) -> QColor:
        """The title-bar colour of a layer category."""
        return _hsl(*CATEGORY_HUES.get(category, (0, 0)), self.title_lightness)


DARK = Theme(
    name="dark",
    background=QColor("#1d1f23"), grid_minor=QColor("#25282d"), grid_major=QColor("#2e3238"),
    node_body=QColor("#2c2f35"), node_border=QColor("#15171a"), selected=QColor("#f0b43c"),
    title_text=QColor("#f4f5f7"), text=QColor("#d9dce1"), text_dim=QColor("#8d939d"),
    shape_text=QColor("#8fd3ff"), wire=QColor("#7d8591"), wire_label_bg=QColor("#24272c"),
    port_fill=QColor("#9aa3ae"), port_ring=QColor("#1d1f23"), error=QColor("#ff5555"),
    error_body=QColor("#4a2529"), warning=QColor("#e6b450"), group_fill=QColor(120, 140, 170, 28),
    group_border=QColor("#56606e"), ok=QColor("#63d68c"), title_lightness=78,
)

LIGHT = Theme(
    name="light",
    background=QColor("#f3f4f6"), grid_minor=QColor("#e7e9ec"), grid_major=QColor("#d9dce1"),
    node_body=QColor("#ffffff"), node_border=QColor("#b7bcc4"), selected=QColor("#e08a00"),
    title_text=QColor("#ffffff"), text=QColor("#23262b"), text_dim=QColor("#6b717b"),
    shape_text=QColor("#0b62a8"), wire=QColor("#8a919b"), wire_label_bg=QColor("#ffffff"),
    port_fill=QColor("#5e6671"), port_ring=QColor("#ffffff"), error=QColor("#d62c2c"),
    error_body=QColor("#fde8e8"), warning=QColor("#b7791f"), group_fill=QColor(80, 110, 160, 22),
    group_border=QColor("#9aa6b5"), ok=QColor("#1f9d55"), title_lightness=105,
    minimap_bg=QColor(255, 255, 255, 200), minimap_view=QColor(40, 40, 40, 160),
)

THEMES = {"dark": DARK, "light": LIGHT}


def get_theme(name: str) -> Theme:
    """The theme called ``name`` ("dark" or "light"); ValueError names the choices."""
    try:
        return THEMES[name]
    except KeyError:
        raise ValueError(f"unknown theme {name!r}; choose one of {', '.join(THEMES)}") from None


class Fonts:
    """The canvas fonts, made once per scene (QFont needs a running QGuiApplication)."""

    def __init__(self, base_size: float = 8.5) -> None:
        self.title = QFont()
        self.title.setPointSizeF(base_size + 0.5)
        self.title.setBold(True)
        self.body = QFont()
        self.body.setPointSizeF(base_size)
        self.small = QFont()
        self.small.setPointSizeF(base_size - 0.5)
        self.mono = QFont("DejaVu Sans Mono")
        self.mono.setStyleHint(QFont.StyleHint.Monospace)
        self.mono.setPointSizeF(base_size - 0.5)
        self.group = QFont()
        self.group.setPointSizeF(base_size + 1.5)
        self.group.setBold(True)
