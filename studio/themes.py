"""The dark and the light theme: a Fusion palette plus ``assets/themes/<name>.qss``.

:class:`ThemeManager` applies one to the application, recolours the icons and tells every
listener (the canvas paints its own colours) through ``changed``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QObject, QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QPainter, QPalette
from PySide6.QtWidgets import (
    QApplication,
    QProxyStyle,
    QStyle,
    QStyleOption,
    QStyleOptionHeader,
    QWidget,
)

from .resources import THEMES, IconSet

SPLITTER_WIDTH = 7   # px: a grip one can find and hit (Fusion's 4 px band with a 6 px dotted mark was not)


@dataclass(frozen=True)
class Theme:
    name: str
    window: str
    base: str
    alternate: str
    text: str
    muted: str
    button: str
    highlight: str
    link: str
    passed: str   # a verdict that holds (an export verified), as the status bar's "valid"
    failed: str   # a verdict that does not (an export that failed its checks)

    @property
    def dark(self) -> bool:
        return QColor(self.window).lightness() < 128

    def palette(self) -> QPalette:
        p = QPalette()
        roles = QPalette.ColorRole
        for role, value in (
            (roles.Window, self.window), (roles.WindowText, self.text), (roles.Base, self.base),
            (roles.AlternateBase, self.alternate), (roles.Text, self.text), (roles.Button, self.button),
            (roles.ButtonText, self.text), (roles.Highlight, self.highlight), (roles.HighlightedText, "#ffffff"),
            (roles.ToolTipBase, self.button), (roles.ToolTipText, self.text), (roles.Link, self.link),
            (roles.PlaceholderText, self.muted), (roles.BrightText, "#ffffff"),
        ):
            p.setColor(role, QColor(value))
        for role in (roles.WindowText, roles.Text, roles.ButtonText):
            p.setColor(QPalette.ColorGroup.Disabled, role, QColor(self.muted))
        return p


THEME_TABLE = {
    "dark": Theme("dark", window="#1e222a", base="#16191f", alternate="#1b1f26", text="#d8dee9", muted="#7d8594",
                  button="#2a2f39", highlight="#3d6fd9", link="#8fb4ff", passed="#7ee787", failed="#ff7b72"),
    "light": Theme("light", window="#f3f4f6", base="#ffffff", alternate="#f6f7f9", text="#1f2430",
                   muted="#7a808c", button="#e9ebef", highlight="#2f6fde", link="#1f5fc9", passed="#1e7b34", failed="#c62828"),
}


def verdict_colour(palette: QPalette, ok: bool) -> QColor:
    """The colour of a verdict (passed or failed) in the theme whose palette ``palette`` is: a dialog
    knows its palette, not the theme (the light theme's red is 2.6:1 on the dark window)."""
    dark = palette.color(QPalette.ColorRole.Window).lightness() < 128
    theme = THEME_TABLE["dark" if dark else "light"]
    return QColor(theme.passed if ok else theme.failed)


class ThemeManager(QObject):
    """Applies a theme to the application; ``changed(Theme)`` tells the views that paint themselves."""

    changed = Signal(object)

    def __init__(self, app: QApplication, icons: IconSet, folder: Path = THEMES,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.app = app
        self.icons = icons
        self.folder = folder
        self.current: Theme = THEME_TABLE["dark"]

    def apply(self, name: str) -> Theme:
        """Switch to theme ``name`` (``dark`` or ``light``)."""
        theme = THEME_TABLE[name]
        if not isinstance(self.app.style(), StudioStyle):
            style = StudioStyle()
            # Qt takes the style (it parents it to the application in C++, unseen by PySide): say so from
            # Python, or the wrapper's last reference going frees the style Qt still draws with, and Qt
            # frees it again when the style is next replaced (a test run aborted on that double free).
            style.setParent(self.app)
            self.app.setStyle(style)
        self.app.setPalette(theme.palette())
        qss = self.folder / f"{name}.qss"
        text = qss.read_text(encoding="utf-8") if qss.is_file() else ""
        text = text.replace("@ICONS@", self.icons.folder.as_posix())
        if text != self.app.styleSheet():  # re-polishing every widget is the slow part of a switch
            self.app.setStyleSheet(text)
        self.icons.set_color(theme.text)
        self.current = theme
        self.changed.emit(theme)
        return theme


class StudioStyle(QProxyStyle):
    """Fusion, with a table's sort arrow pointing the way the column is sorted (down: largest first),
    and splitter handles one can see.

    QHeaderView hands a descending column to the style as ``SortUp`` (the Windows convention), so
    Fusion drew an up arrow over the Runs table sorted newest first. Fusion's splitter handle is a
    4 px band with a few dots 1.7:1 against the light theme's window: users did not find where to drag.
    """

    def __init__(self) -> None:
        super().__init__("Fusion")    # by name: the proxy owns the base style it makes

    def drawPrimitive(self, element: QStyle.PrimitiveElement, option: QStyleOption,  # noqa: N802 (Qt override)
                      painter: QPainter, widget: QWidget | None = None) -> None:
        if element == QStyle.PrimitiveElement.PE_IndicatorHeaderArrow and isinstance(option, QStyleOptionHeader):
            flipped = QStyleOptionHeader(option)
            up, down = QStyleOptionHeader.SortIndicator.SortUp, QStyleOptionHeader.SortIndicator.SortDown
            flipped.sortIndicator = down if option.sortIndicator == up else up if option.sortIndicator == down \
                else option.sortIndicator
            option = flipped
        super().drawPrimitive(element, option, painter, widget)

    def drawControl(self, element: QStyle.ControlElement, option: QStyleOption,  # noqa: N802 (Qt override)
                    painter: QPainter, widget: QWidget | None = None) -> None:
        if element == QStyle.ControlElement.CE_Splitter:
            paint_splitter_handle(option, painter)
            return
        super().drawControl(element, option, painter, widget)

    def pixelMetric(self, metric: QStyle.PixelMetric, option: QStyleOption | None = None,  # noqa: N802
                    widget: QWidget | None = None) -> int:
        if metric == QStyle.PixelMetric.PM_SplitterWidth:
            return SPLITTER_WIDTH
        return super().pixelMetric(metric, option, widget)


def paint_splitter_handle(option: QStyleOption, painter: QPainter) -> None:
    """A splitter handle: a band a shade off the window along its whole length, and in its middle a
    grip of dots in the text colour at half strength (at least 3:1 against the window in either theme);
    under the mouse, the band takes the highlight colour."""
    palette, rect = option.palette, QRectF(option.rect)
    window = palette.color(QPalette.ColorRole.Window)
    hover = bool(option.state & QStyle.StateFlag.State_MouseOver)
    band = palette.color(QPalette.ColorRole.Highlight) if hover else (
        window.lighter(135) if window.lightness() < 128 else window.darker(112))
    painter.save()
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.fillRect(rect, band)
    text = palette.color(QPalette.ColorRole.WindowText)
    grip = QColor(text.red(), text.green(), text.blue(), 255 if hover else 150)
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(grip)
    across = bool(option.state & QStyle.StateFlag.State_Horizontal)   # widgets side by side: a vertical band
    centre, radius = rect.center(), 1.6
    for k in range(-3, 4):   # seven dots, 6 px apart: a 38 px grip
        offset = QPointF(0, 6 * k) if across else QPointF(6 * k, 0)
        painter.drawEllipse(centre + offset, radius, radius)
    painter.restore()
