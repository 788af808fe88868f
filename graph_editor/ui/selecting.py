"""The canvas's selection kept the same as the controller's, both ways.

The controller holds the selection (node and block ids); the scene's items show it. Qt changes the
items' selection on clicks and rubber bands, and the canvas tells the controller; the controller's
changes (select all, a paste, undo) are shown on the items. A big graph's nodes without items yet
(:mod:`~graph_editor.ui.unbuilt`) stay selected in the controller until a click or a rubber band without
Ctrl or Shift chooses anew, and come selected when their items are made.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QMouseEvent

from .controller import EditorController
from .groups import GroupBox, GroupFrame
from .items import NodeItem
from .scene import GraphScene
from .wires import WireItem


class SelectionSync:
    """Mixed into :class:`~graph_editor.ui.canvas.GraphCanvas`: the selection between scene and controller."""

    controller: EditorController
    graph_scene: GraphScene
    _syncing: bool
    _plain_press = False

    def _selection_from_scene(self) -> None:
        scene = self.graph_scene
        if self._syncing or scene.building:   # items being made come selected as the controller says
            return
        ids = []
        for item in scene.selectedItems():
            if isinstance(item, NodeItem):
                ids.append(item.node_id)
            elif isinstance(item, GroupBox | GroupFrame):
                ids.append(item.group_id)
        if scene.unbuilt and not self._choosing_anew():   # selected nodes without items stay selected
            ids += [i for i in self.controller.selection if i in scene.unbuilt]
        self._syncing = True
        try:
            self.controller.select(ids)
        finally:
            self._syncing = False

    def _choosing_anew(self) -> bool:
        """Whether a click or a rubber band without Ctrl or Shift is choosing the selection (which drops
        whatever was selected, nodes off screen included): from the press until its release is handled."""
        return self._plain_press

    def pressed(self, event: QMouseEvent | None) -> None:
        """The canvas's left button went down (``event``) or up (None)."""
        additive = Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier
        self._plain_press = event is not None and event.button() == Qt.MouseButton.LeftButton and not (
            event.modifiers() & additive)

    def _select_items(self, ids: list[str]) -> None:
        if self._syncing:
            return
        self._syncing = True
        try:
            scene = self.graph_scene
            wanted = set(ids)
            wanted |= {owner for i in ids if (owner := scene.collapsed_owner(i)) is not None}  # hidden: its block
            scene.chosen = wanted
            for item in (*scene.nodes.values(), *scene.boxes.values(), *scene.frames.values()):
                key = getattr(item, "node_id", None) or getattr(item, "group_id", None)
                item.setSelected(key in wanted)
        finally:
            self._syncing = False

    def delete_selection(self) -> str | None:
        """Delete the selected nodes, blocks and wires (one undo step)."""
        wires = [i.edge for i in self.graph_scene.selectedItems() if isinstance(i, WireItem)]
        return self.controller.delete(self.controller.selection, wires)
