"""The node canvas: a ``QGraphicsView`` that paints the graph and turns gestures into intents.

Gestures: drag from a port to a port of the other kind to wire them (the target port turns
green, or red with the reason shown beside the cursor); drop on a wired single input to
replace its wire; drop on empty canvas to pick a layer that is placed there, wired; drag
from a wired input to move that wire's end, or drop it on empty canvas to cut it; Alt-drag
(or Ctrl+right-drag) a line across wires to cut them; select a wire and press Delete;
rubber-band and Ctrl-click to select; drag to move (one undo step); wheel to zoom around the cursor;
middle-drag or Space-drag to pan; Tab to search for a layer and place it at the cursor; Home to fit;
double-click a block to open it in place (brought into view), an open block's title to close it;
right-click for a menu. Drops of palette layers (``LAYER_MIME``) and copied nodes (``GRAPH_MIME``).

A canvas made with ``editable=False`` shows a graph that is not the user's design (the
backward graph of the Inspect workspace): it selects, moves, zooms, pans and opens and closes
blocks, but draws, cuts, deletes, drops and pastes nothing and has no edit menu or keys. Its
``scene`` may be a :class:`GraphScene` subclass whose items draw other things. Try it alone:
``python -m graph_editor.ui.preview FILE.graph.json``.
"""

from __future__ import annotations

from PySide6.QtCore import QPoint, QPointF, QRect, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import (
    QContextMenuEvent,
    QKeyEvent,
    QMouseEvent,
    QPainter,
    QPaintEvent,
    QResizeEvent,
    QWheelEvent,
)
from PySide6.QtWidgets import QGraphicsItem, QGraphicsView, QWidget

from ..model import Graph
from .breadcrumbs import Breadcrumbs
from .controller import EditorController
from .far_view import FarPicture, paint_rubber_band
from .gestures import CutLine, WireDrag
from .groups import GroupBox, GroupFrame
from .items import NODE_W, SIMPLE_LOD, NodeItem, PortItem
from .live import LiveAnalysis
from .menus import edit_shortcut, show_context_menu
from .minimap import Minimap
from .overlays import ReasonLabel, draw_grid
from .placing import PlacingView
from .scene import GraphScene
from .search_popup import LayerSearchPopup
from .selecting import SelectionSync
from .style import Theme, get_theme
from .wires import LABEL_MIN_LOD

ZOOM_RANGE = (0.05, 4.0)
PAN_ROOM = QRectF(-1e5, -1e5, 2e5, 2e5)   # the least the view may scroll over
PAN_MARGIN = 2e4   # beyond the graph
ZOOM_SETTLE_MS = 250  # item caches come back this long after the last zoom step
PORT_PICK = 12.0  # how near (in view pixels) a port must be to catch a dragged wire


class GraphCanvas(SelectionSync, PlacingView):
    """Shows the edited graph and sends every edit through the controller (drops and the layer
    search: :class:`~graph_editor.ui.placing.PlacingView`)."""

    node_activated = Signal(str)

    def __init__(self, controller: EditorController, live: LiveAnalysis | None, parent: QWidget | None = None,
                 theme: str | Theme = "dark", *, editable: bool = True,
                 scene: type[GraphScene] = GraphScene) -> None:
        super().__init__(parent)
        self.controller, self.live, self.editable = controller, live, editable
        self.graph_scene = scene(controller.graph, get_theme(theme) if isinstance(theme, str) else theme, self)
        self.setScene(self.graph_scene)
        self.graph_scene.set_theme(self.graph_scene.theme)
        self.setRenderHints(QPainter.RenderHint.Antialiasing | QPainter.RenderHint.TextAntialiasing)
        self.setOptimizationFlags(QGraphicsView.OptimizationFlag.DontAdjustForAntialiasing
                                  | QGraphicsView.OptimizationFlag.DontSavePainterState)
        self.setCacheMode(QGraphicsView.CacheModeFlag.CacheBackground)
        self.setDragMode(QGraphicsView.DragMode.RubberBandDrag)
        self.setRubberBandSelectionMode(Qt.ItemSelectionMode.IntersectsItemShape)
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.NoAnchor)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setFrameShape(QGraphicsView.Shape.NoFrame)
        self.setAcceptDrops(editable)
        self.setMouseTracking(True)
        self._space = False
        self._pan_from: QPointF | None = None
        self._press_at = QPointF()   # where the left button went down (a rubber band's corner)
        self._gesture: WireDrag | CutLine | None = None
        self._syncing = False
        self._search_at = QPointF()
        self.reason_label = ReasonLabel(self.viewport())
        self.search = LayerSearchPopup(self)
        self._search_wire: PortItem | None = None
        self._press_positions: dict[QGraphicsItem, QPointF] = {}   # movable items where a press found them
        self._dragged_at: dict[QGraphicsItem, QPointF] = {}        # ... and where the drag last saw them
        self.search.chosen.connect(lambda type_: self.drop_layer(type_, self._search_at, self._search_wire))
        self._zoom_settle = QTimer(self, singleShot=True, interval=ZOOM_SETTLE_MS, timeout=self._zoom_settled)
        self.far = FarPicture(self, self.graph_scene)
        self.enable_minimap = True
        self.minimap = Minimap(self)
        self._minimap_timer = QTimer(self, singleShot=True, interval=40, timeout=self._on_scene_settled)
        self.reason_label.set_theme(self.graph_scene.theme)
        self.breadcrumbs = Breadcrumbs(self)
        self.breadcrumbs.set_theme(self.graph_scene.theme)
        self._crumbs_graph = controller.graph
        controller.graph.events.groups_changed.connect(self.breadcrumbs.schedule)
        controller.selection_changed.connect(self.breadcrumbs.schedule)
        self.setSceneRect(PAN_ROOM)  # room to pan anywhere (grown with the graph); fit_view frames the nodes
        controller.size_hint = self.graph_scene.node_sizes
        controller.graph_replaced.connect(self._on_graph_replaced)
        controller.selection_changed.connect(self._select_items)
        controller.refused.connect(self.hint)
        self.graph_scene.selectionChanged.connect(self._selection_from_scene)
        self.graph_scene.changed.connect(lambda _: self._minimap_timer.start())
        if live is not None:
            live.inferred.connect(self.graph_scene.apply_inference)
            live.analyzed.connect(self._on_analyzed)
            if live.inference is not None:
                self.graph_scene.apply_inference(live.inference)
            if live.analysis is not None:
                self._on_analyzed(live.analysis, [])

    # ---------------------------------------------------------------- view
    @property
    def zoom(self) -> float:
        return self.transform().m11()

    def visible_rect(self) -> QRectF:
        return self.mapToScene(self.viewport().rect()).boundingRect()

    def _on_scene_settled(self) -> None:
        self.grow_scene_rect()
        self.minimap.refresh()

    def grow_scene_rect(self) -> None:
        """The view scrolls only within its scene rectangle: it holds the graph with room around it (a
        20,000-layer chain is 3.6 million wide; past the fixed 100,000 nothing could be scrolled to)."""
        rect = self.graph_scene.items_rect()
        room = PAN_ROOM if rect.isEmpty() else PAN_ROOM.united(rect.adjusted(-PAN_MARGIN, -PAN_MARGIN,
                                                                              PAN_MARGIN, PAN_MARGIN))
        if not self.sceneRect().contains(room):
            self.setSceneRect(self.sceneRect().united(room))

    def fit_view(self) -> None:
        """Show every node, zoomed to fit (never past 1.25x on a small graph)."""
        self.grow_scene_rect()
        rect = self.graph_scene.items_rect()
        if rect.isEmpty():
            self.resetTransform()
            self.centerOn(0, 0)
        else:
            self.fitInView(rect.adjusted(-40, -40, 40, 40), Qt.AspectRatioMode.KeepAspectRatio)
            if self.zoom > 1.25:
                self.zoom_at(1.25 / self.zoom, QPointF(self.viewport().rect().center()))
                self.centerOn(rect.center())
        self.minimap.refresh()

    def show_rect(self, rect: QRectF) -> None:
        """Bring ``rect`` (an opened block) into view: moved to, zoomed out only as far as needed."""
        if self.visible_rect().contains(rect):
            return
        zoom = self.zoom
        self.fitInView(rect.adjusted(-40, -40, 40, 40), Qt.AspectRatioMode.KeepAspectRatio)
        if self.zoom > zoom:  # it fits at the zoom the user had: only move there
            self.scale(zoom / self.zoom, zoom / self.zoom)
            self.centerOn(rect.center())
        self.minimap.refresh()

    def zoom_at(self, factor: float, view_pos: QPointF) -> None:
        """Zoom by ``factor``, keeping the scene point under ``view_pos`` where it is."""
        factor = max(ZOOM_RANGE[0] / self.zoom, min(ZOOM_RANGE[1] / self.zoom, factor))
        self.graph_scene.set_item_caching(False)  # each step would redraw every cache: paint directly
        self._zoom_settle.start()
        before = self.mapToScene(view_pos.toPoint())
        self.scale(factor, factor)
        drift = self.mapFromScene(before) - view_pos.toPoint()
        self.horizontalScrollBar().setValue(self.horizontalScrollBar().value() + drift.x())
        self.verticalScrollBar().setValue(self.verticalScrollBar().value() + drift.y())
        self.minimap.refresh()

    def far_mode(self) -> bool:
        """Zoomed out so far that nodes are blocks without text: frames come from :class:`FarPicture`."""
        return self.zoom < SIMPLE_LOD

    def _zoom_settled(self) -> None:
        self.graph_scene.set_item_caching(not self.far_mode())   # far: the tiles are the cache
        if self.far_mode():
            self.viewport().update()   # the gesture's scaled tiles give way to tiles of this scale

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 - Qt's name
        if self.zoom >= LABEL_MIN_LOD:   # far out, wires still show their shapes: the sketch has no labels
            self.realize_near()
        if not self.far_mode():
            super().paintEvent(event)
            return
        painter = QPainter(self.viewport())   # far out: nodes without items are sketched, none made (far_sketch)
        if not self.far.paint(painter, event.rect(), self.zoom, self._zoom_settle.isActive()):
            self._paint_far(painter, event.rect())   # most tiles missing (just opened or edited): all at once
        paint_rubber_band(self, painter)
        painter.end()

    def _paint_far(self, painter: QPainter, exposed: QRect) -> None:
        """Paint ``exposed`` (viewport pixels) far out in one pass, as a tile is (a first frame: tiles would be many)."""
        source = self.mapToScene(exposed).boundingRect()
        painter.save()
        painter.setTransform(self.viewportTransform())
        self.drawBackground(painter, source)
        painter.resetTransform()
        painter.setRenderHints(self.renderHints())
        self.graph_scene.render_items(painter, QRectF(exposed), source)
        painter.restore()

    def realize_near(self) -> None:
        """Items for what is in view, and half a view around it, that a big graph's scene has not made yet
        (:mod:`~graph_editor.ui.unbuilt`): asked before every paint nearer than far out (far_sketch draws those)."""
        if self.graph_scene.unbuilt:
            view = self.visible_rect()
            dx, dy = max(300.0, view.width() / 2), max(300.0, view.height() / 2)
            self.graph_scene.realize(view.adjusted(-dx, -dy, dx, dy))

    def realize_under(self, a: QPointF, b: QPointF | None = None) -> None:
        """Items for the nodes and wires near view point ``a`` (or in the band from ``a`` to ``b``), where the
        mouse acts on a canvas zoomed far out: what it clicks, hovers, drags to or selects has its item."""
        if not self.graph_scene.unbuilt or not self.far_mode():
            return
        r = PORT_PICK
        band = QRectF(a, b if b is not None else a).normalized().adjusted(-r, -r, r, r)
        self.graph_scene.realize(self.mapToScene(band.toAlignedRect()).boundingRect())

    def pan_by(self, dx: float, dy: float) -> None:
        """Move the view by (dx, dy) view pixels."""
        self.horizontalScrollBar().setValue(int(self.horizontalScrollBar().value() - dx))
        self.verticalScrollBar().setValue(int(self.verticalScrollBar().value() - dy))

    def set_theme(self, theme: str | Theme) -> None:
        """Switch between the dark and light themes (or any :class:`Theme`)."""
        self.graph_scene.set_theme(get_theme(theme) if isinstance(theme, str) else theme)
        self.resetCachedContent()
        self.far.clear()
        self.reason_label.set_theme(self.graph_scene.theme)
        self.breadcrumbs.set_theme(self.graph_scene.theme)
        self.viewport().update()
        self.minimap.refresh()

    def drawBackground(self, painter: QPainter, rect: QRectF) -> None:
        draw_grid(painter, rect, self.graph_scene.theme, self.zoom)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self.minimap.place()
        self._minimap_timer.start()   # more or less of the graph is in view now: shown only when needed

    def scrollContentsBy(self, dx: int, dy: int) -> None:
        super().scrollContentsBy(dx, dy)
        self._minimap_timer.start()

    def _on_analyzed(self, analysis: object, problems: object) -> None:
        nodes = getattr(analysis, "nodes", None)
        self.graph_scene.apply_stats(None if nodes is None else {s.id: (s.params, s.flops) for s in nodes})

    def _on_graph_replaced(self, graph: Graph) -> None:
        self.graph_scene.set_graph(graph)
        self._crumbs_graph.events.groups_changed.disconnect(self.breadcrumbs.schedule)
        self._crumbs_graph = graph
        graph.events.groups_changed.connect(self.breadcrumbs.schedule)
        self.breadcrumbs.schedule()
        self.fit_view()

    def show_group(self, gid: str) -> None:
        """Bring block ``gid`` into view: its frame or block, or the closed block it is inside."""
        scene = self.graph_scene
        item = scene.frames.get(gid) or scene.boxes.get(gid)
        if item is None:
            owner = scene.owner.get(next(iter(self.controller.graph.groups[gid].nodes), ""))
            item = scene.boxes.get(owner) if owner else None
        if item is not None:
            self.show_rect(item.sceneBoundingRect() if not isinstance(item, GroupFrame) else item.rect)

    # ---------------------------------------------------------------- ports and wires
    def item_at(self, view_pos: QPoint) -> QGraphicsItem | None:
        """The item under ``view_pos``; on a port, the node or block it belongs to."""
        return self.graph_scene.item_at(self.mapToScene(view_pos), self.transform())

    def port_at(self, view_pos: QPointF, want_input: bool | None = None) -> PortItem | None:
        """The nearest port within PORT_PICK pixels of ``view_pos`` (of one kind, if given)."""
        r = PORT_PICK
        area = self.mapToScene(QRectF(view_pos.x() - r, view_pos.y() - r, 2 * r, 2 * r).toRect()).boundingRect()
        ports = [p for p in self.graph_scene.ports_in(area) if want_input is None or p.is_input == want_input]
        centre = self.mapToScene(view_pos.toPoint())
        return min(ports, key=lambda p: (p.scenePos() - centre).manhattanLength(), default=None)

    # ---------------------------------------------------------------- mouse
    def mousePressEvent(self, event: QMouseEvent) -> None:
        pos = event.position()
        self._press_at = pos
        self.realize_under(pos)
        button, mods = event.button(), event.modifiers()
        if button == Qt.MouseButton.MiddleButton or (button == Qt.MouseButton.LeftButton and self._space):
            self._pan_from = pos
            self.viewport().setCursor(Qt.CursorShape.ClosedHandCursor)
            return
        alt = mods & Qt.KeyboardModifier.AltModifier
        ctrl_right = button == Qt.MouseButton.RightButton and mods & Qt.KeyboardModifier.ControlModifier
        if not self.editable:
            pass
        elif (button == Qt.MouseButton.LeftButton and alt) or ctrl_right:
            self._gesture = CutLine(self, pos)
            return
        elif button == Qt.MouseButton.LeftButton:
            port = self.port_at(pos)
            if port is not None:
                self._gesture = self._wire_drag(port, pos)
                return
        self.pressed(event)
        super().mousePressEvent(event)
        self._press_positions = self._movable_positions()
        self._dragged_at = dict(self._press_positions)

    def _wire_drag(self, port: PortItem, pos: QPointF) -> WireDrag:
        """A drag from an output draws a wire; from a wired input, picks that wire's end up
        (the last wire, on a variadic input); from a free input, draws one backwards."""
        wires = [w for w in port.wires if w.isVisible()]
        if port.is_input and wires:
            wire = wires[-1]
            wire.hide()
            drag = WireDrag(self, wire.src, pos, picked=wire.edge)
            drag.item.follow(self.mapToScene(pos.toPoint()))
            return drag
        return WireDrag(self, port, pos)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        pos = event.position()
        if self._pan_from is not None:
            delta = pos - self._pan_from
            self._pan_from = pos
            self.pan_by(delta.x(), delta.y())
        elif self._gesture is not None:
            self.realize_under(pos)   # the port a dragged wire may land on
            self._gesture.move(pos)
        else:
            dragging = bool(event.buttons() & Qt.MouseButton.LeftButton)
            band = dragging and self.graph_scene.mouseGrabberItem() is None   # a band selects what it covers
            if band or (not dragging and self.zoom * NODE_W >= 3):   # a hover over blocks of 1-2 px: nothing
                self.realize_under(pos, self._press_at if band else None)
            if dragging:
                self.graph_scene.dragging = True
            elif self._pan_from is None and not self._space and self.editable:  # a port says it can be dragged from
                over_port = self.port_at(pos) is not None
                self.viewport().setCursor(Qt.CursorShape.CrossCursor if over_port else Qt.CursorShape.ArrowCursor)
            super().mouseMoveEvent(event)
            if dragging:
                self._follow_dragged()

    def _follow_dragged(self) -> None:
        """The nodes Qt just moved under the mouse: their wires follow (node items do not watch their own
        position, which cost a Python call for every change of every item)."""
        seen = self._dragged_at
        for item, was in seen.items():
            if isinstance(item, NodeItem) and item.pos() != was:
                seen[item] = item.pos()
                item.follow()

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        if self._pan_from is not None:
            self._pan_from = None
            self.viewport().setCursor(Qt.CursorShape.OpenHandCursor if self._space else Qt.CursorShape.ArrowCursor)
        elif self._gesture is not None:
            gesture, self._gesture = self._gesture, None
            gesture.finish()
        else:
            super().mouseReleaseEvent(event)
            self.pressed(None)
            self._follow_dragged()
            self._dragged_at = {}
            self.graph_scene.dragging = False
            self._commit_moves()

    def _movable_positions(self) -> dict[QGraphicsItem, QPointF]:
        return {i: i.pos() for i in self.graph_scene.selectedItems() if isinstance(i, NodeItem | GroupBox)}

    def _commit_moves(self) -> None:
        """After a drag: one MoveNodes for everything that moved (a block moves its members)."""
        before = self._press_positions
        positions: dict[str, tuple[float, float]] = {}
        for item, old in before.items():
            delta = item.pos() - old
            if delta.isNull():
                continue
            if isinstance(item, NodeItem):
                positions[item.node_id] = (round(item.pos().x(), 1), round(item.pos().y(), 1))
            else:
                for n in self.controller.graph.groups[item.group_id].nodes:
                    x, y = self.controller.graph.nodes[n].position
                    positions[n] = (round(x + delta.x(), 1), round(y + delta.y(), 1))
        self._press_positions = {}
        if positions:
            self.controller.move_nodes(positions)

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:
        self.realize_under(event.position())
        item = self.item_at(event.position().toPoint())
        if isinstance(item, NodeItem):
            self.node_activated.emit(item.node_id)
        elif isinstance(item, GroupBox):
            gid = item.group_id
            if self.controller.set_collapsed(gid, False) is None and gid in self.graph_scene.frames:
                self.show_rect(self.graph_scene.frames[gid].rect)
        elif isinstance(item, GroupFrame) and item.header_rect().contains(self.mapToScene(event.position().toPoint())):
            self.controller.set_collapsed(item.group_id, True)
        else:
            super().mouseDoubleClickEvent(event)

    def contextMenuEvent(self, event: QContextMenuEvent) -> None:
        self.realize_under(QPointF(event.pos()))
        if self.editable and self._gesture is None and not event.modifiers() & Qt.KeyboardModifier.ControlModifier:
            show_context_menu(self, event.pos())

    def wheelEvent(self, event: QWheelEvent) -> None:
        self.zoom_at(1.0015 ** event.angleDelta().y(), event.position())

    # ---------------------------------------------------------------- keys
    def focusNextPrevChild(self, next: bool) -> bool:  # noqa: A002 - Qt's name; Tab opens the search
        return False if self.editable else super().focusNextPrevChild(next)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        key = event.key()
        if key == Qt.Key.Key_Space and not event.isAutoRepeat():
            self._space = True
            self.viewport().setCursor(Qt.CursorShape.OpenHandCursor)
        elif key == Qt.Key.Key_Home:
            self.fit_view()
        elif not self.editable:
            super().keyPressEvent(event)
        elif key in (Qt.Key.Key_Delete, Qt.Key.Key_Backspace):
            self.delete_selection()
        elif key == Qt.Key.Key_Tab:
            self.open_search()
        elif key == Qt.Key.Key_Escape and isinstance(self._gesture, WireDrag):
            self._gesture.cancel()
            self._gesture = None
        elif not edit_shortcut(self, event):
            super().keyPressEvent(event)

    def keyReleaseEvent(self, event: QKeyEvent) -> None:
        if event.key() == Qt.Key.Key_Space and not event.isAutoRepeat():
            self._space = False
            self.viewport().setCursor(Qt.CursorShape.ArrowCursor)
        else:
            super().keyReleaseEvent(event)

