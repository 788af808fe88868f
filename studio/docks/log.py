"""The log: what the studio did (files opened and saved, refused edits, validation), newest last.

Messages arrive through :meth:`LogDock.append` or, from any module, through the Python
``logging`` handler :meth:`LogDock.handler` returns (thread-safe: it goes through a signal).
"""

from __future__ import annotations

import logging
import time

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QFontDatabase, QTextCursor
from PySide6.QtWidgets import QPlainTextEdit, QVBoxLayout, QWidget

MAX_LINES = 2000


class _Bridge(QObject):
    message = Signal(str, str)


class _QtLogHandler(logging.Handler):
    def __init__(self, bridge: _Bridge) -> None:
        super().__init__(logging.INFO)
        self.bridge = bridge

    def emit(self, record: logging.LogRecord) -> None:
        self.bridge.message.emit(record.getMessage(), record.levelname.lower())


class LogDock(QWidget):
    """A read-only, bounded log view."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.view = QPlainTextEdit(readOnly=True)
        self.view.setMaximumBlockCount(MAX_LINES)
        self.view.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.view.setPlaceholderText("Messages about files, edits and checks appear here.")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.view)
        self._bridge = _Bridge(self)
        self._bridge.message.connect(self.append)

    def append(self, text: str, level: str = "info") -> None:
        """Add one line, stamped with the time; warnings and errors are marked."""
        mark = {"warning": "! ", "error": "✖ "}.get(level, "")
        self.view.appendPlainText(f"{time.strftime('%H:%M:%S')}  {mark}{text}")
        self.view.moveCursor(QTextCursor.MoveOperation.End)

    def lines(self) -> list[str]:
        return [line for line in self.view.toPlainText().splitlines() if line]

    def handler(self) -> logging.Handler:
        """A logging handler that writes into this dock."""
        return _QtLogHandler(self._bridge)


if __name__ == "__main__":
    from studio.preview import preview

    def _make() -> LogDock:
        dock = LogDock()
        dock.append("Opened assets/templates/resnet18.graph.json")
        dock.append("Cannot set conv1.kernel_size: kernel_size must be >= 1, got 0", "warning")
        dock.append("Validate: 2 problems", "error")
        return dock

    raise SystemExit(preview(_make, "Log", (520, 200)))
