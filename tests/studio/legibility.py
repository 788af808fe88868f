"""Measuring what a user can read: every visible text a window draws, located (labels, buttons, tabs,
header sections, table cells, the text items and axes of graphics views, pyqtgraph's included) and its
WCAG contrast ratio taken from the pixels the window really painted: the most common colour of the
text's rectangle is its background, the pixel that stands out most from it is the ink."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import pyqtgraph as pg
from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QColor, QImage
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractItemView,
    QGraphicsSimpleTextItem,
    QGraphicsTextItem,
    QGraphicsView,
    QHeaderView,
    QLabel,
    QTabBar,
    QWidget,
)

WIDGET_TEXT = 4.5   # WCAG AA for normal text: labels, buttons, tabs, headers
GLYPH_TEXT = 3.0    # cells and plot text, whose thin glyphs are antialiased below their colour
DISABLED_TEXT = 2.5  # WCAG leaves disabled controls out; greyed, still to be read


def luminance(c: QColor) -> float:
    def channel(v: int) -> float:
        x = v / 255
        return x / 12.92 if x <= 0.03928 else ((x + 0.055) / 1.055) ** 2.4
    return 0.2126 * channel(c.red()) + 0.7152 * channel(c.green()) + 0.0722 * channel(c.blue())


def contrast(a: QColor, b: QColor) -> float:
    lo, hi = sorted((luminance(a), luminance(b)))
    return (hi + 0.05) / (lo + 0.05)


@dataclass(frozen=True)
class Text:
    """One text as drawn: what it is, where in the window, and the contrast it needs."""

    what: str
    rect: QRect
    needs: float


def ink_contrast(image: QImage, rect: QRect) -> tuple[float, str] | None:
    """The contrast of the ink in ``rect`` of ``image`` against its background, and the background."""
    rect = rect.intersected(image.rect())
    if rect.width() < 4 or rect.height() < 8:
        return None
    counts = Counter(image.pixel(x, y) & 0xFFFFFF for y in range(rect.top(), rect.bottom() + 1)
                     for x in range(rect.left(), rect.right() + 1))
    background = QColor.fromRgb(counts.most_common(1)[0][0])
    return max(contrast(QColor.fromRgb(p), background) for p in counts), background.name()


def _columns(model, view: QAbstractItemView) -> int:
    try:
        return model.columnCount(view.rootIndex())
    except TypeError:      # a list model's columnCount is private to PySide
        return 1


def _item_view(view: QAbstractItemView, name: str, add) -> None:
    model = view.model()
    if model is None:
        return
    for row in range(min(model.rowCount(view.rootIndex()), 40)):
        for col in range(_columns(model, view)):
            index = model.index(row, col, view.rootIndex())
            text = index.data()
            if text is not None and str(text).strip():
                add(f"{name} cell {str(text)[:30]!r}", view.visualRect(index).adjusted(1, 1, -1, -1),
                    GLYPH_TEXT, view.viewport())


def _header(header: QHeaderView, add) -> None:
    model = header.model()
    if model is None:
        return
    across = header.orientation() == Qt.Orientation.Horizontal
    for i in range(header.count()):
        text = model.headerData(i, header.orientation())
        if header.isSectionHidden(i) or not text:
            continue
        at, size = header.sectionViewportPosition(i), header.sectionSize(i)
        rect = QRect(at, 0, size, header.height()) if across else QRect(0, at, header.width(), size)
        add(f"header {text!r}", rect.adjusted(2, 2, -2, -2), WIDGET_TEXT, header.viewport())


def _graphics(view: QGraphicsView, name: str, add) -> None:
    for item in view.scene().items():
        if not item.isVisible():
            continue
        if isinstance(item, QGraphicsTextItem | QGraphicsSimpleTextItem):
            text = item.toPlainText() if isinstance(item, QGraphicsTextItem) else item.text()
            what = f"{name} text {text[:30]!r}" if text.strip() else None
        else:
            what = f"{name} {item.orientation} axis" if isinstance(item, pg.AxisItem) else None
        if what:
            add(what, view.mapFromScene(item.sceneBoundingRect()).boundingRect(), GLYPH_TEXT, view.viewport())


def texts(window: QWidget) -> list[Text]:
    """Every text of ``window`` a user sees now (not hidden, not covered by another widget)."""
    found: list[Text] = []
    for w in window.findChildren(QWidget):
        if not w.isVisible() or w.visibleRegion().isEmpty():
            continue

        def add(what: str, rect: QRect, needs: float, widget: QWidget = w) -> None:
            seen = rect.intersected(widget.visibleRegion().boundingRect())
            top = QRect(widget.mapTo(window, seen.topLeft()), seen.size())
            under = window.childAt(top.center())
            if seen.isEmpty() or under is None or not (under is widget or widget.isAncestorOf(under)):
                return                     # scrolled away or under another widget
            found.append(Text(what, top, needs if widget.isEnabled() else DISABLED_TEXT))

        name = f"{type(w).__name__}#{w.objectName()}"
        if isinstance(w, QLabel) and w.text().strip():
            add(f"{name} {w.text()[:40]!r}", w.contentsRect(), WIDGET_TEXT)
        elif isinstance(w, QAbstractButton) and w.text().strip():
            add(f"{name} {w.text()[:40]!r}", w.rect().adjusted(3, 3, -3, -3), WIDGET_TEXT)
        elif isinstance(w, QTabBar):
            for i in range(w.count()):
                need = WIDGET_TEXT if w.isTabEnabled(i) else DISABLED_TEXT
                add(f"tab {w.tabText(i)!r}", w.tabRect(i).adjusted(3, 3, -3, -3), need)
        elif isinstance(w, QHeaderView):
            _header(w, add)
        elif isinstance(w, QAbstractItemView):
            _item_view(w, name, add)
        elif isinstance(w, QGraphicsView) and w.scene() is not None:
            _graphics(w, name, add)
    return found


def illegible(window: QWidget, where: str) -> list[str]:
    """The texts of ``window`` below the contrast they need, one line each naming it and ``where``."""
    image = window.grab().toImage()
    bad = []
    for text in texts(window):
        measured = ink_contrast(image, text.rect)
        if measured is not None and measured[0] < text.needs:
            bad.append(f"{where}: {text.what} {measured[0]:.2f}:1 on {measured[1]} (needs {text.needs})")
    return bad
