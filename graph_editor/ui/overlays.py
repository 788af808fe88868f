"""What the canvas draws over or under the graph: the grid, and the transient reason label."""

from __future__ import annotations

from PySide6.QtCore import QLineF, QPoint, QRectF, QTimer
from PySide6.QtGui import QPainter, QPen
from PySide6.QtWidgets import QLabel, QWidget

from .style import Theme

REASON_MS = 3000


def draw_grid(painter: QPainter, rect: QRectF, theme: Theme, zoom: float) -> None:
    """Background and grid (minor lines from 0.6x zoom, major lines from 0.15x)."""
    painter.fillRect(rect, theme.background)
    for step, colour, min_zoom in ((20, theme.grid_minor, 0.6), (100, theme.grid_major, 0.15)):
        if zoom < min_zoom:
            continue
        painter.setPen(QPen(colour, 0))
        left, top = int(rect.left()) - int(rect.left()) % step, int(rect.top()) - int(rect.top()) % step
        lines = [QLineF(x, rect.top(), x, rect.bottom()) for x in range(left, int(rect.right()) + 1, step)]
        lines += [QLineF(rect.left(), y, rect.right(), y) for y in range(top, int(rect.bottom()) + 1, step)]
        painter.drawLines(lines)


class ReasonLabel(QLabel):
    """A short message beside the cursor (why a wire is refused) that hides itself."""

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.hide()
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(REASON_MS)
        self._timer.timeout.connect(self.hide)

    def set_theme(self, t: Theme) -> None:
        self.setStyleSheet(
            f"QLabel {{ background: {t.node_body.name()}; color: {t.text.name()}; border: 1px solid "
            f"{t.group_border.name()}; border-radius: 4px; padding: 4px 8px; }}")

    def say(self, text: str, ok: bool, at: QPoint, theme: Theme) -> None:
        """Show ``text`` just below-right of ``at``, kept inside the parent."""
        colour = theme.ok if ok else theme.error
        self.setText(f"<span style='color:{colour.name()}'>{'✓' if ok else '✗'}</span> {text}")
        self.adjustSize()
        pos = at + QPoint(16, 12)
        parent = self.parentWidget()
        assert parent is not None  # made with a parent (the canvas) and kept in it
        room = parent.rect()
        if pos.x() + self.width() > room.right() - 4:
            pos.setX(max(4, pos.x() - self.width() - 32))
        if pos.y() + self.height() > room.bottom() - 4:
            pos.setY(max(4, pos.y() - self.height() - 24))
        self.move(pos)
        self.show()
        self.raise_()
        self._timer.start()
