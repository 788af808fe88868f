"""The layer palette: every layer type by category, searchable, dragged onto the canvas.

A drag carries the layer type id as ``LAYER_MIME``; the canvas accepts the drop and asks
the controller to add the node there. Double-click (or Enter) emits ``activated`` so the
main window can place the layer without a mouse drag.
"""

from __future__ import annotations

from PySide6.QtCore import QMimeData, Qt, Signal
from PySide6.QtWidgets import QLineEdit, QTreeWidget, QTreeWidgetItem, QVBoxLayout, QWidget

from graph_editor.model import LayerSpec, categories
from graph_editor.ui.mime import LAYER_MIME

TYPE_ROLE = Qt.ItemDataRole.UserRole
SEARCH_ROLE = Qt.ItemDataRole.UserRole + 1


class LayerTree(QTreeWidget):
    """The categories and their layers; dragging a layer starts a LAYER_MIME drag."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setHeaderHidden(True)
        self.setDragEnabled(True)
        self.setDragDropMode(QTreeWidget.DragDropMode.DragOnly)
        self.setRootIsDecorated(True)
        self.setIndentation(14)
        self.setUniformRowHeights(True)

    def mimeTypes(self) -> list[str]:
        return [LAYER_MIME]

    def mimeData(self, items: list[QTreeWidgetItem]) -> QMimeData:
        data = QMimeData()
        types = [i.data(0, TYPE_ROLE) for i in items if i.data(0, TYPE_ROLE)]
        if types:
            data.setData(LAYER_MIME, types[0].encode("utf-8"))
            data.setText(types[0])
        return data

    def supportedDropActions(self) -> Qt.DropAction:
        return Qt.DropAction.CopyAction


class PaletteDock(QWidget):
    """Search box over the layer tree."""

    activated = Signal(str)  # a layer type, to be placed by the window

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.search = QLineEdit(placeholderText="Search layers…", clearButtonEnabled=True)
        self.tree = LayerTree()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.setSpacing(6)
        layout.addWidget(self.search)
        layout.addWidget(self.tree)
        self._items: dict[str, QTreeWidgetItem] = {}
        self._fill()
        self.search.textChanged.connect(self.filter)
        self.search.returnPressed.connect(self._activate_first)
        self.tree.itemActivated.connect(self._on_activated)

    def _fill(self) -> None:
        for category, specs in categories().items():
            parent = QTreeWidgetItem(self.tree, [category])
            parent.setFlags(Qt.ItemFlag.ItemIsEnabled)
            font = parent.font(0)
            font.setBold(True)
            parent.setFont(0, font)
            for spec in specs:
                item = QTreeWidgetItem(parent, [spec.display])
                item.setData(0, TYPE_ROLE, spec.type)
                item.setData(0, SEARCH_ROLE, f"{spec.type} {spec.display} {category} {spec.doc}".lower())
                item.setToolTip(0, _tooltip(spec))
                item.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable
                              | Qt.ItemFlag.ItemIsDragEnabled)
                self._items[spec.type] = item
        self.tree.expandAll()

    def item(self, type_: str) -> QTreeWidgetItem:
        """The tree item of a layer type (tests drag it)."""
        return self._items[type_]

    def filter(self, text: str) -> None:
        """Show the layers whose name, category or description contains every word of ``text``."""
        words = text.lower().split()
        for i in range(self.tree.topLevelItemCount()):
            cat = self.tree.topLevelItem(i)
            shown = 0
            for j in range(cat.childCount()):
                item = cat.child(j)
                hit = all(w in item.data(0, SEARCH_ROLE) for w in words)
                item.setHidden(not hit)
                shown += hit
            cat.setHidden(shown == 0)
        self.tree.expandAll()

    def visible_types(self) -> list[str]:
        return [t for t, item in self._items.items() if not item.isHidden() and not item.parent().isHidden()]

    def _activate_first(self) -> None:
        visible = self.visible_types()
        if visible:
            self.activated.emit(visible[0])

    def _on_activated(self, item: QTreeWidgetItem) -> None:
        type_ = item.data(0, TYPE_ROLE)
        if type_:
            self.activated.emit(type_)


def _tooltip(spec: LayerSpec) -> str:
    lines = [f"<b>{spec.display}</b> — {spec.doc}"]
    if spec.params:
        lines.append("<br>" + "<br>".join(f"<i>{p.name}</i>: {p.doc}" for p in spec.params))
    lines.append("<br><small>Drag onto the canvas, or double-click to add.</small>")
    return "".join(lines)


if __name__ == "__main__":
    from studio.preview import preview

    raise SystemExit(preview(PaletteDock, "Layers"))
