"""Where layers land on the canvas: palette drops, dropped copies of nodes, the layer search (Tab,
or a wire dropped on empty canvas), and the reason beside the cursor when an edit is refused.

:class:`PlacingView` is the part of :class:`~graph_editor.ui.canvas.GraphCanvas` that turns those
into controller calls; the canvas makes the widgets it names (``search``, ``reason_label``) and the
scene, and refuses every drop when it is not ``editable``.
"""

from __future__ import annotations

from PySide6.QtCore import QPointF, Signal
from PySide6.QtGui import QCursor, QDragEnterEvent, QDragMoveEvent, QDropEvent
from PySide6.QtWidgets import QGraphicsView

from .controller import EditorController
from .items import NODE_W, PORT_Y, TITLE_H, PortItem
from .mime import GRAPH_MIME, LAYER_MIME
from .overlays import ReasonLabel
from .scene import GraphScene
from .search_popup import LayerSearchPopup


class PlacingView(QGraphicsView):
    """Places layers and pasted nodes through the controller and says why one is refused."""

    hint = Signal(str)  # a line for the status bar: a refused edit, what a drag would do

    # made by the canvas
    controller: EditorController
    editable: bool
    graph_scene: GraphScene
    reason_label: ReasonLabel
    search: LayerSearchPopup
    _search_at: QPointF
    _search_wire: PortItem | None

    # ---------------------------------------------------------------- feedback
    def show_reason(self, text: str, ok: bool = False, at: QPointF | None = None) -> None:
        """Say why (or what) beside the cursor for a few seconds, and on ``hint``."""
        at = at or QPointF(self.viewport().mapFromGlobal(QCursor.pos()))
        self.reason_label.say(text, ok, at.toPoint(), self.graph_scene.theme)
        self.hint.emit(text)

    def open_search(self, view_pos: QPointF | None = None, wire_from: PortItem | None = None) -> None:
        """Open the layer search; the chosen layer is placed at ``view_pos`` (default: the
        cursor) and, after a wire was dropped there, wired to ``wire_from``."""
        self._search_wire = wire_from
        if view_pos is None:
            local = self.viewport().mapFromGlobal(QCursor.pos())
            view_pos = QPointF(local) if self.viewport().rect().contains(local) else QPointF(
                self.viewport().rect().center())
        self._search_at = self.mapToScene(view_pos.toPoint())
        self.search.popup(self.viewport().mapToGlobal(view_pos.toPoint()))

    # ---------------------------------------------------------------- drops
    def drop_layer(self, type_: str, scene_pos: QPointF, wire_from: PortItem | None = None) -> str | None:
        """Add a layer with its title bar centred on ``scene_pos`` (or, for a wire, its port
        there), wired to ``wire_from`` if given, and select it."""
        if wire_from is not None:
            x = scene_pos.x() - (NODE_W if wire_from.is_input else 0)
            at = (round(x, 1), round(scene_pos.y() - PORT_Y, 1))
            port = (wire_from.node_id, wire_from.name)
            reason = self.controller.add_connected(type_, at, dst=port if wire_from.is_input else None,
                                                   src=None if wire_from.is_input else port)
        else:
            reason = self.controller.add_node(type_, (round(scene_pos.x() - NODE_W / 2, 1),
                                                      round(scene_pos.y() - TITLE_H / 2, 1)))
        if reason is None and self.controller.last_added:
            self.controller.select([self.controller.last_added])
        else:
            self.show_reason(reason or "")
        return reason

    def _accepts(self, event: QDragEnterEvent | QDragMoveEvent | QDropEvent) -> bool:
        data = event.mimeData()
        return self.editable and (data.hasFormat(LAYER_MIME) or data.hasFormat(GRAPH_MIME))

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if self._accepts(event):
            event.acceptProposedAction()
        else:
            super().dragEnterEvent(event)

    def dragMoveEvent(self, event: QDragMoveEvent) -> None:
        if self._accepts(event):
            event.acceptProposedAction()
        else:
            super().dragMoveEvent(event)

    def dropEvent(self, event: QDropEvent) -> None:
        data = event.mimeData()
        at = self.mapToScene(event.position().toPoint())
        if data.hasFormat(LAYER_MIME):
            self.drop_layer(bytes(data.data(LAYER_MIME).data()).decode("utf-8"), at)
        elif data.hasFormat(GRAPH_MIME):
            result = self.controller.paste(bytes(data.data(GRAPH_MIME).data()).decode("utf-8"), at=(at.x(), at.y()))
            if isinstance(result, str):
                self.show_reason(result)
        else:
            super().dropEvent(event)
            return
        event.acceptProposedAction()
