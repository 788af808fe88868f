"""What the themes draw can be seen: splitter grips (users did not find where to drag) and texts in
the light theme, measured as WCAG contrast ratios on the pixels the real window paints."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QImage, QPalette
from PySide6.QtWidgets import QSplitter, QTextEdit

pytestmark = pytest.mark.qt


def luminance(c: QColor) -> float:
    def channel(v: int) -> float:
        x = v / 255
        return x / 12.92 if x <= 0.03928 else ((x + 0.055) / 1.055) ** 2.4
    return 0.2126 * channel(c.red()) + 0.7152 * channel(c.green()) + 0.0722 * channel(c.blue())


def contrast(a: QColor, b: QColor) -> float:
    lo, hi = sorted((luminance(a), luminance(b)))
    return (hi + 0.05) / (lo + 0.05)


def best_contrast(image: QImage, rect, against: QColor) -> float:
    return max(contrast(image.pixelColor(x, y), against)
               for x in range(rect.left(), rect.right() + 1) for y in range(rect.top(), rect.bottom() + 1))


@pytest.mark.parametrize("theme", ["dark", "light"])
@pytest.mark.parametrize("orientation", [Qt.Orientation.Horizontal, Qt.Orientation.Vertical])
def test_splitter_grips_can_be_seen_and_hit(window, qtbot, tmp_path, theme, orientation):
    """Fusion drew a 4 px band with a few dots at 1.7:1 against the light window (3.2:1 on the dark):
    a handle at least 6 px thick whose grip stands 3:1 (WCAG's figure for controls) off the window,
    over at least 30 px of its length."""
    window.theme_actions[theme].trigger()
    split = QSplitter(orientation, window)
    split.addWidget(QTextEdit())
    split.addWidget(QTextEdit())
    split.resize(400, 300)
    split.show()
    qtbot.wait(20)
    image = split.grab().toImage()
    split.grab().save(str(tmp_path / f"splitter_{theme}.png"))
    handle = split.handle(1).geometry()
    assert min(handle.width(), handle.height()) >= 6
    bg = window.palette().color(QPalette.ColorRole.Window)
    assert best_contrast(image, handle, bg) >= 3.0
    along = [p for p in range(handle.top(), handle.bottom() + 1)] if orientation == Qt.Orientation.Horizontal \
        else [p for p in range(handle.left(), handle.right() + 1)]
    cx, cy = handle.center().x(), handle.center().y()
    marked = [p for p in along if contrast(image.pixelColor(cx, p) if orientation == Qt.Orientation.Horizontal
                                           else image.pixelColor(p, cy), bg) >= 3.0]
    assert max(marked) - min(marked) >= 30
