"""The Tab popup: type a few letters of a layer, press Enter, and it is placed at the cursor."""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QFrame, QLineEdit, QListWidget, QListWidgetItem, QVBoxLayout, QWidget

from ..model import LayerSpec, categories


def matches(spec: LayerSpec, words: list[str]) -> int | None:
    """A rank for ``spec`` against the typed words (lower is better), None when it does not match."""
    name = spec.display.lower()
    haystack = f"{spec.type} {spec.display} {spec.category} {spec.doc}".lower()
    if not all(w in haystack for w in words):
        return None
    if not words:
        return 3
    first = words[0]
    return 0 if name.startswith(first) else 1 if first in name else 2


class LayerSearchPopup(QFrame):
    """A search field over the layer catalog; emits ``chosen(type)`` and closes."""

    chosen = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Popup)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.field = QLineEdit(self)
        self.field.setPlaceholderText("Search layers…")
        self.list = QListWidget(self)
        self.list.setUniformItemSizes(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.setSpacing(4)
        layout.addWidget(self.field)
        layout.addWidget(self.list)
        self.resize(280, 320)
        self._specs = [s for specs in categories().values() for s in specs]
        self.field.textChanged.connect(self.filter)
        self.field.returnPressed.connect(self.accept_current)
        self.list.itemActivated.connect(lambda item: self._choose(item.data(Qt.ItemDataRole.UserRole)))
        self.field.installEventFilter(self)
        self.filter("")

    def filter(self, text: str) -> None:
        """Show the layers whose name, category or description hold every typed word."""
        words = text.lower().split()
        ranked = sorted((r, i, s) for i, s in enumerate(self._specs) if (r := matches(s, words)) is not None)
        self.list.clear()
        for _, _, spec in ranked:
            item = QListWidgetItem(f"{spec.display}    ·  {spec.category}")
            item.setData(Qt.ItemDataRole.UserRole, spec.type)
            item.setToolTip(spec.doc)
            self.list.addItem(item)
        self.list.setCurrentRow(0)

    def accept_current(self) -> None:
        item = self.list.currentItem()
        if item is not None:
            self._choose(item.data(Qt.ItemDataRole.UserRole))

    def _choose(self, type_: str) -> None:
        self.close()
        self.chosen.emit(type_)

    def popup(self, global_pos: QPoint) -> None:
        """Show at ``global_pos`` with an empty search field focused."""
        self.field.clear()
        self.move(global_pos)
        self.show()
        self.field.setFocus()

    def eventFilter(self, watched: object, event: object) -> bool:
        if isinstance(event, QKeyEvent) and event.type() == QKeyEvent.Type.KeyPress and event.key() in (
                Qt.Key.Key_Down, Qt.Key.Key_Up):
            step = 1 if event.key() == Qt.Key.Key_Down else -1
            self.list.setCurrentRow(max(0, min(self.list.count() - 1, self.list.currentRow() + step)))
            return True
        return False


if __name__ == "__main__":  # preview: python -m graph_editor.ui.search_popup
    import sys

    from PySide6.QtWidgets import QApplication

    app = QApplication(sys.argv)
    popup = LayerSearchPopup()
    popup.chosen.connect(lambda type_: print(type_))
    popup.popup(QPoint(200, 200))
    sys.exit(app.exec())
