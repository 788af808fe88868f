"""The layer palette: every layer type by category, searchable, dragged onto the canvas.

A drag carries the layer type id as ``LAYER_MIME``; the canvas accepts the drop and asks
the controller to add the node there. Double-click (or Enter) emits ``activated`` so the
main window can place the layer without a mouse drag.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QMimeData, QPoint, Qt, Signal
from PySide6.QtWidgets import QLineEdit, QMenu, QTreeWidget, QTreeWidgetItem, QVBoxLayout, QWidget

from graph_editor.model import LayerSpec, categories
from graph_editor.ui.mime import GRAPH_MIME, LAYER_MIME

from ..blocks import Block

TYPE_ROLE = Qt.ItemDataRole.UserRole
SEARCH_ROLE = Qt.ItemDataRole.UserRole + 1
BLOCK_ROLE = Qt.ItemDataRole.UserRole + 2  # a saved block's copied-nodes JSON
BLOCKS = "My blocks"


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
        return [LAYER_MIME, GRAPH_MIME]

    def mimeData(self, items: Sequence[QTreeWidgetItem]) -> QMimeData:
        """A layer drags its type id (LAYER_MIME); a saved block its nodes (GRAPH_MIME)."""
        data = QMimeData()
        item = next((i for i in items if i.data(0, TYPE_ROLE) or i.data(0, BLOCK_ROLE)), None)
        if item is not None and item.data(0, BLOCK_ROLE):
            data.setData(GRAPH_MIME, item.data(0, BLOCK_ROLE).encode("utf-8"))
        elif item is not None:
            data.setData(LAYER_MIME, item.data(0, TYPE_ROLE).encode("utf-8"))
            data.setText(item.data(0, TYPE_ROLE))
        return data

    def supportedDropActions(self) -> Qt.DropAction:
        return Qt.DropAction.CopyAction


class PaletteDock(QWidget):
    """Search box over the layer tree."""

    activated = Signal(str)  # a layer type, to be placed by the window
    block_activated = Signal(str)  # a saved block's nodes (JSON), to be pasted by the window
    block_removed = Signal(str)  # the name of a block the user deleted

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
        self.tree.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.tree.customContextMenuRequested.connect(self._context_menu)
        self._blocks_item: QTreeWidgetItem | None = None

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

    def set_blocks(self, blocks: Sequence[Block]) -> None:
        """Show the saved blocks in their own category (hidden when there are none)."""
        if self._blocks_item is None:
            self._blocks_item = QTreeWidgetItem(self.tree, [BLOCKS])
            self._blocks_item.setFlags(Qt.ItemFlag.ItemIsEnabled)
            font = self._blocks_item.font(0)
            font.setBold(True)
            self._blocks_item.setFont(0, font)
        self._blocks_item.takeChildren()
        for block in blocks:
            item = QTreeWidgetItem(self._blocks_item, [block.name])
            item.setData(0, BLOCK_ROLE, block.text)
            item.setData(0, SEARCH_ROLE, f"{block.name} {BLOCKS} block".lower())
            item.setToolTip(0, f"<b>{block.name}</b> — a saved block of {block.nodes} layers<br>"
                               "<small>Drag onto the canvas or double-click to add; right-click to delete.</small>")
            item.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable | Qt.ItemFlag.ItemIsDragEnabled)
        self._blocks_item.setHidden(not blocks)
        self._blocks_item.setExpanded(True)
        self.filter(self.search.text())

    def block_item(self, name: str) -> QTreeWidgetItem | None:
        parent = self._blocks_item
        children = [parent.child(i) for i in range(parent.childCount())] if parent else []
        return next((c for c in children if c is not None and c.text(0) == name), None)

    def _context_menu(self, pos: QPoint) -> None:
        item = self.tree.itemAt(pos)
        if item is None or not item.data(0, BLOCK_ROLE):
            return
        menu = QMenu(self)
        menu.addAction(f"Delete block '{item.text(0)}'", lambda: self.block_removed.emit(item.text(0)))
        menu.exec(self.tree.viewport().mapToGlobal(pos))

    def item(self, type_: str) -> QTreeWidgetItem:
        """The tree item of a layer type (tests drag it)."""
        return self._items[type_]

    def filter(self, text: str) -> None:
        """Show the layers whose name, category or description contains every word of ``text``."""
        words = text.lower().split()
        for i in range(self.tree.topLevelItemCount()):
            cat = self.tree.topLevelItem(i)
            if cat is None:
                continue
            shown = 0
            for j in range(cat.childCount()):
                item = cat.child(j)
                if item is None:
                    continue
                hit = all(w in item.data(0, SEARCH_ROLE) for w in words)
                item.setHidden(not hit)
                shown += hit
            cat.setHidden(shown == 0)
            cat.setExpanded(True)

    def visible_types(self) -> list[str]:
        return [t for t, item in self._items.items()
                if not item.isHidden() and (cat := item.parent()) is not None and not cat.isHidden()]

    def _activate_first(self) -> None:
        visible = self.visible_types()
        if visible:
            self.activated.emit(visible[0])

    def _on_activated(self, item: QTreeWidgetItem) -> None:
        if item.data(0, BLOCK_ROLE):
            self.block_activated.emit(item.data(0, BLOCK_ROLE))
        elif item.data(0, TYPE_ROLE):
            self.activated.emit(item.data(0, TYPE_ROLE))


def _tooltip(spec: LayerSpec) -> str:
    lines = [f"<b>{spec.display}</b> — {spec.doc}"]
    if spec.params:
        lines.append("<br>" + "<br>".join(f"<i>{p.name}</i>: {p.doc}" for p in spec.params))
    lines.append("<br><small>Drag onto the canvas, or double-click to add.</small>")
    return "".join(lines)


if __name__ == "__main__":
    from studio.preview import preview

    raise SystemExit(preview(PaletteDock, "Layers"))
