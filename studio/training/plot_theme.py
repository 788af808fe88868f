"""The colours of the training plots and the confusion matrix in the studio's light and dark themes.

pyqtgraph and the painted matrix do not take colours from the Qt palette, so each view keeps a
:class:`PlotTheme` and repaints with it on ``set_plot_theme``. :func:`apply_plot_theme` themes every
such view under a widget: ``studio.training.hook`` calls it on the main window when it builds the
training docks and on every theme change, so a dashboard or runs dock needs no wiring of its own
beyond being in the window.

The curve colours are the Okabe-Ito palette (colour-blind safe). Each theme may show a palette
colour as another, readable on its background: on dark, black becomes a light grey and the dark
blue a lighter blue; on light, the yellow (1.3:1 against white) becomes an olive and the orange
and sky blue (2.3:1) a shade darker, so every curve has the 3:1 a thin line needs. The views
map the colours themselves, so callers keep naming palette colours whatever the theme.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from PySide6.QtWidgets import QWidget

BLUE, VERMILLION, GREEN, PURPLE, ORANGE, SKY, BLACK, YELLOW = (
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442")
PALETTE = (BLUE, VERMILLION, GREEN, PURPLE, ORANGE, SKY, BLACK, YELLOW)

RGBA = tuple[int, int, int, int]


@dataclass(frozen=True)
class PlotTheme:
    """Everything the plots and the matrix paint, for one studio theme."""

    name: str
    background: str
    text: str            # titles, axis labels and ticks, legend labels, the crosshair readout
    axis: str            # axis lines and ticks; grid lines are this colour at ``grid_alpha``
    grid_alpha: float
    crosshair: str
    panel: RGBA          # behind the legend and the readout, so curves under them do not hide text
    curve_swaps: tuple[tuple[str, str], ...]  # palette colour -> the colour shown in this theme
    cell: str            # an empty matrix cell (the shading is laid over it)
    right: str           # the shade of the diagonal (correct predictions)...
    wrong: str           # ...and of the errors, both laid over ``cell`` by their share of the row
    shade_floor: float   # the least opacity of a cell with any count, so a rare error still shows
    cell_border: str
    count_on_pale: str   # a count over a lightly shaded cell
    muted: str           # the matrix's axis captions and its "appears after..." message
    selected: str        # the outline of the clicked cell
    miss: str            # a gallery caption of a wrong prediction
    notice: str          # the dashboard's "Compiling..." line

    def curve(self, color: str) -> str:
        """The colour to draw a curve asked for in ``color`` (a palette colour may be swapped)."""
        key = color.upper()
        return next((shown for asked, shown in self.curve_swaps if asked == key), color)


LIGHT = PlotTheme(
    name="light", background="#ffffff", text="#222222", axis="#8c8c8c", grid_alpha=0.25, crosshair="#888888",
    panel=(255, 255, 255, 215), curve_swaps=((YELLOW, "#858A00"), (ORANGE, "#BC8200"), (SKY, "#4693BF")),
    cell="#ffffff", right="#008c46", wrong="#cd2d23", shade_floor=0.08, cell_border="#dddddd", count_on_pale="#222222", muted="#555555", selected=BLUE,
    miss="#b3261e", notice="#8a5a00")

DARK = PlotTheme(
    name="dark", background="#16191f", text="#d8dee9", axis="#7d8594", grid_alpha=0.3, crosshair="#9aa3b2",
    panel=(30, 34, 42, 220), curve_swaps=((BLACK, "#D9D9D9"), (BLUE, "#3388D8")),
    cell="#1b1f26", right="#008c46", wrong="#e8493e", shade_floor=0.3, cell_border="#2c313b", count_on_pale="#d8dee9", muted="#9aa3b2", selected=SKY,
    miss="#ff7b72", notice="#f0b35a")

PLOT_THEMES = {t.name: t for t in (LIGHT, DARK)}


def plot_theme(theme: str | PlotTheme) -> PlotTheme:
    """The plot colours of studio theme ``theme`` ("light" or "dark"), or ``theme`` itself."""
    if isinstance(theme, PlotTheme):
        return theme
    try:
        return PLOT_THEMES[theme]
    except KeyError:
        raise ValueError(f"no plot colours for the theme {theme!r}; known: {', '.join(PLOT_THEMES)}") from None


@runtime_checkable
class Themed(Protocol):
    """A view that paints with a :class:`PlotTheme`."""

    def set_plot_theme(self, theme: str | PlotTheme) -> None: ...


def apply_plot_theme(root: QWidget, theme: str | PlotTheme) -> int:
    """Give ``theme`` to ``root`` and every themed view inside it; returns how many were themed.

    Walks the widget tree once (a theme switch is rare; nothing here is on the redraw path)."""
    colours = plot_theme(theme)
    views = [w for w in (root, *root.findChildren(QWidget)) if isinstance(w, Themed)]
    for view in views:
        view.set_plot_theme(colours)
    return len(views)
