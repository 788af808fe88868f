"""The scene: canvas items that mirror a graph, kept in step by the graph's events.

The scene knows nothing of editing: it follows ``graph.events`` to add, remove and redraw
items, and :meth:`GraphScene.apply_inference` paints shapes and problems. It is used by
the editing canvas and, alone, by the thumbnail renderer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from PySide6.QtCore import QObject, QPointF, QRect, QRectF, Qt
from PySide6.QtGui import QPainter, QTransform
from PySide6.QtWidgets import QGraphicsItem, QGraphicsScene, QGraphicsSceneHelpEvent, QToolTip

from ..model import Edge, Graph, Inference, Node, Problem, fmt_shape
from .background import collection_paused
from .groups import GroupBox, GroupFrame, release
from .items import NodeItem, PortItem, node_rect
from .look import Metrics
from .marks import TrainingMarks
from .scene_blocks import BlockItems
from .style import DARK, Fonts, Theme
from .unbuilt import LazyItems, Unbuilt
from .wires import WireItem

NODE_Z, WIRE_Z = 1 - 1e-3, -1 - 1e-3   # where the nodes' and the wires' z values begin (see _stacked)


class GraphScene(LazyItems, BlockItems, QGraphicsScene):
    """Items for every node, wire and group of ``graph``; a big graph's nodes and wires get theirs when a
    view comes near them (:meth:`realize`; until then :attr:`unbuilt` knows where they are)."""

    LAZY_FROM: int | None = 1000   # nodes: from this size items are made where a view looks (None: all at once)

    def __init__(self, graph: Graph, theme: Theme = DARK, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.theme = theme
        self.fonts = Fonts()
        self.metrics = Metrics(self.fonts)
        self.nodes: dict[str, NodeItem] = {}      # the nodes' items made so far (all, below LAZY_FROM)
        self.wires: dict[Edge, WireItem] = {}
        self.unbuilt = Unbuilt()                  # the nodes and wires without items yet
        self.chosen: set[str] = set()             # what the views show selected (an item made later comes so)
        self.building = False   # items being made: the selection changes Qt reports meanwhile are not the user's
        self._by_node: dict[str | None, list[Problem]] = {}   # the inference's problems by node (items made later show them)
        self._errors: set[str] = set()                  # nodes in error (the overview draws them red)
        self.boxes: dict[str, GroupBox] = {}
        self.frames: dict[str, GroupFrame] = {}
        self.owner: dict[str, str] = {}  # hidden node -> the block it is drawn in
        self.doubled: set[Edge] = set()   # edges whose wire would lie on another's (see BlockItems._rebind_wires)
        self.inference: Inference | None = None
        self.stats: dict[str, tuple[int, int]] | None = None  # node -> (params, FLOPs), from the analysis
        self.dragging = False  # while the view drags items, model moves do not fight it
        # What the overview draws changed (nodes added, removed, moved, their state, blocks): it redraws
        # its picture only when this moved on (see the minimap).
        self.revision = 0
        self._items_rect: QRectF | None = None   # items_rect(), kept until something moves it
        self._caching = True
        self._bare = False   # render_items: no background
        self._graph: Graph | None = None
        self.marks = TrainingMarks(self)   # frozen, learning-rate multipliers, new head, swept parameters
        self.set_graph(graph)

    @property
    def graph(self) -> Graph:
        assert self._graph is not None
        return self._graph

    # ---------------------------------------------------------------- building
    def set_graph(self, graph: Graph) -> None:
        """Show ``graph`` (all items rebuilt) and follow its events. The items are built with the collector
        paused: it walked every item made so far, again and again, and found nothing to free."""
        with collection_paused():
            self._build(graph)

    def _release_items(self) -> None:
        """Break the items' reference cycles (ports and wires, owners and ports) so that the items Qt drops
        are freed at once, without the collector (which may have been told to leave them alone: the
        controller's :meth:`~graph_editor.ui.controller.EditorController.set_graph`)."""
        for item in self.nodes.values():
            release(item)
        for box in self.boxes.values():
            release(box)

    def _build(self, graph: Graph) -> None:
        if self._graph is not None:
            self._follow(self._graph, False)
        self._release_items()
        self.clear()
        self.marks.reset()
        self.nodes.clear()
        self.wires.clear()
        self.boxes.clear()
        self.frames.clear()
        self.owner = {}
        self.doubled = set()
        self.inference = None
        self.stats = None
        self._by_node, self._errors = {}, set()
        self._graph = graph
        self.unbuilt = Unbuilt()
        self._nodes_made = self._wires_made = 0   # items made in the graph's order so far (see _stacked)
        if self.LAZY_FROM is not None and len(graph.nodes) >= self.LAZY_FROM:
            self._defer_all(graph)
            self._nodes_made, self._wires_made = len(graph.nodes), len(graph.edges)
        else:
            for node_id in graph.nodes:
                self._on_node_added(node_id)
            for edge in graph.edges:
                self._on_edge_added(edge)
        self._on_groups_changed()
        self._follow(graph, True)
        self.marks.sync()
        self.contents_changed()

    def drawBackground(self, painter: QPainter, rect: QRectF | QRect) -> None:  # noqa: N802 - Qt's name
        if not self._bare:
            super().drawBackground(painter, rect)

    def contents_changed(self, geometry: bool = True) -> None:
        """Something the overview shows changed; with ``geometry``, where things are (the bounding
        rectangle is measured again when next asked), else only how they look."""
        self.revision += 1
        if geometry:
            self._items_rect = None

    def helpEvent(self, event: QGraphicsSceneHelpEvent) -> None:  # noqa: N802 - Qt's name
        """Tooltips of nodes, ports and wires are made when first wanted (their ``toolTip``); Qt's
        own help event reads the text without asking the Python item."""
        at = event.scenePos()
        port = self.port_under(at)
        if port is not None:   # not a Qt item: Qt's own help event would not find it
            QToolTip.showText(event.screenPos(), port.toolTip(), event.widget())
            event.setAccepted(True)
            return
        for item in self.items(at):
            if isinstance(item, NodeItem | WireItem):
                item.toolTip()
                break
        super().helpEvent(event)

    def port_under(self, at: QPointF) -> PortItem | None:
        """The port whose area holds scene point ``at``, if any."""
        spot = QRectF(at.x() - 0.5, at.y() - 0.5, 1, 1)   # an empty rectangle meets nothing
        return next((p for p in self.ports_in(spot) if p.sceneBoundingRect().contains(at)), None)

    def item_at(self, at: QPointF, transform: QTransform) -> QGraphicsItem | None:
        """The item a click at ``at`` is on: a port's owner (ports lie on top), else the topmost item."""
        port = self.port_under(at)
        return port.parentItem() if port is not None else self.itemAt(at, transform)

    def ports_in(self, area: QRectF) -> Iterator[PortItem]:
        """The visible ports whose area meets ``area`` (scene coordinates), nodes' and blocks' alike."""
        near = area.adjusted(-13, -13, 13, 13)   # a port's area reaches 13 past its anchor
        for item in self.items(near, Qt.ItemSelectionMode.IntersectsItemBoundingRect):
            if isinstance(item, NodeItem | GroupBox) and item.isVisible():
                for port in (*item.in_ports.values(), *item.out_ports.values()):
                    if port.sceneBoundingRect().intersects(area):
                        yield port

    def _follow(self, graph: Graph, on: bool) -> None:
        ev = graph.events
        for signal, slot in ((ev.node_added, self._on_node_added), (ev.node_removed, self._on_node_removed),
                             (ev.edge_added, self._on_edge_added), (ev.edge_removed, self._on_edge_removed),
                             (ev.params_changed, self._on_params_changed), (ev.node_moved, self._on_node_moved),
                             (ev.groups_changed, self._on_groups_changed), (ev.changed, self.marks.sync)):
            (signal.connect if on else signal.disconnect)(slot)

    def set_theme(self, theme: Theme) -> None:
        self.theme = theme
        self.setBackgroundBrush(theme.background)
        for item in self.items():
            if item.cacheMode() != QGraphicsItem.CacheMode.NoCache:
                item.update()
        self.update()

    def set_item_caching(self, on: bool) -> None:
        """Cache nodes and wires as pixmaps (fast pans) or paint them directly (fast zooms)."""
        if on == self._caching:
            return
        self._caching = on
        mode = QGraphicsItem.CacheMode.DeviceCoordinateCache if on else QGraphicsItem.CacheMode.NoCache
        for item in (*self.nodes.values(), *self.wires.values()):
            item.setCacheMode(mode)

    # ---------------------------------------------------------------- model events
    def make_node_item(self, node: Node) -> NodeItem:
        """The item that draws ``node``: a seam for scenes that show other graphs (the backward graph)."""
        return NodeItem(node)

    def _on_node_added(self, node_id: str) -> None:
        self._make_node(node_id)
        self.contents_changed()

    def _make_node(self, node_id: str, order: int | None = None) -> NodeItem:
        """The item of ``node_id``: the ``order``-th node of the graph as it was opened, or (None) a node
        added since. Items stack in that order, whenever they are made (:func:`_stacked`)."""
        item = self.make_node_item(self.graph.nodes[node_id])
        if order is None:
            order, self._nodes_made = self._nodes_made, self._nodes_made + 1
        item.setZValue(_stacked(NODE_Z, order))
        self.unbuilt.drop_node(node_id)
        if not self._caching:
            item.setCacheMode(QGraphicsItem.CacheMode.NoCache)
        if node_id in self.owner:
            item.setVisible(False)
        if self.inference is not None:
            item.set_state(*self._state(node_id, _shape_text))
        self.nodes[node_id] = item
        self.building = True
        try:
            self.addItem(item)
            if node_id in self.chosen:
                item.setSelected(True)
        finally:
            self.building = False
        return item

    def _on_node_removed(self, node_id: str) -> None:
        if node_id in self.unbuilt:
            self.unbuilt.drop_node(node_id)
            self.contents_changed()
        item = self.nodes.pop(node_id, None)
        if item is not None:
            self.removeItem(item)
            release(item)
            self.contents_changed()

    def _on_edge_added(self, edge: Edge) -> None:
        ends = {edge.src, edge.dst} - self.nodes.keys()
        if ends & self.unbuilt.rects.keys():   # a wire to a node without an item: the node's is made
            self._make(ends, set())
        self._wires_made += 1
        self._make_wire(edge, self._wires_made - 1, settled=False)
        if self._touches_box(edge):
            self._on_groups_changed()  # the box gains a port

    def _make_wire(self, edge: Edge, order: int, settled: bool = True) -> None:
        """The wire of ``edge``, the ``order``-th of the graph (wires stack in that order); ``settled``: the
        edge was there when the shown inference was made (its label red when its node is in error, as
        :meth:`apply_inference` paints it)."""
        src, dst = self.port_for(edge.src, edge.src_port, False), self.port_for(edge.dst, edge.dst_port, True)
        if src is None or dst is None:
            return  # a wire to a port the layer does not have: validation reports it
        label, error = "", False
        if self.inference is not None:
            node = self.nodes.get(edge.dst)
            label = _shape_text(self.inference.edge_shape(edge))
            error = settled and node is not None and node.severity == "error"
        wire = WireItem(edge, src, dst, label, error)
        wire.setZValue(_stacked(WIRE_Z, order))
        if not self._caching:
            wire.setCacheMode(QGraphicsItem.CacheMode.NoCache)
        self.wires[edge] = wire
        self.addItem(wire)
        wire.update_path()   # its curve and, in the scene's fonts, its label's room
        for other in dst.wires:     # a variadic port spreads its wires' ends
            if other is not wire:
                other.update_path()
        if not self.wire_shown(edge):
            wire.hide()

    def _on_edge_removed(self, edge: Edge) -> None:
        self.unbuilt.drop_edge(edge)
        wire = self.wires.pop(edge, None)
        if wire is not None:
            wire.detach()
            self.removeItem(wire)
        if self._touches_box(edge):
            self._on_groups_changed()

    def _on_params_changed(self, node_id: str, name: str) -> None:
        item = self.nodes.get(node_id)
        if item is not None:
            before = item.sceneBoundingRect()
            item.refresh(self.graph.nodes[node_id])
            if item.sceneBoundingRect() != before:   # its height follows its parameter rows (else the overview
                self.contents_changed()              # of 20,000 blocks is not drawn again for a number typed)
        elif node_id in self.unbuilt:
            rect = node_rect(self.graph.nodes[node_id])
            if rect != self.unbuilt.rects[node_id]:
                self.unbuilt.move(node_id, rect, self._rect_of)
                self.contents_changed()

    def _on_node_moved(self, node_id: str) -> None:
        item = self.nodes.get(node_id)
        if item is None and node_id in self.unbuilt:
            self.unbuilt.move(node_id, node_rect(self.graph.nodes[node_id]), self._rect_of)
            self._fit_frames()
            self.contents_changed()
        if item is not None and not self.dragging:
            self._bring_wires(node_id)
            item.setPos(*self.graph.nodes[node_id].position)
            item.follow()
            gid = self.owner.get(node_id)
            if gid is not None:
                members = [self.graph.nodes[n].position for n in self.graph.groups[gid].nodes]
                self.boxes[gid].setPos(min(p[0] for p in members), min(p[1] for p in members))
            self._fit_frames()
            self.contents_changed()

    def node_sizes(self) -> dict[str, tuple[float, float]]:
        """(width, height) of every node box, for the auto-layout."""
        sizes = {k: (v.boundingRect().width() - 6, v.height) for k, v in self.nodes.items()}
        sizes.update((k, (r[2] - r[0] - 6, r[3] - r[1] - 6)) for k, r in self.unbuilt.rects.items())
        return sizes

    def items_rect(self) -> QRectF:
        """The rectangle around every visible node, box and frame (measured once per change: the
        overview and the view's fit ask for it on every scroll)."""
        if self._items_rect is None:
            rect = QRectF()
            for item in (*self.nodes.values(), *self.boxes.values(), *self.frames.values()):
                if item.isVisible():
                    rect = rect.united(item.sceneBoundingRect())
            left = self.unbuilt.bounds(self.owner)
            if left is not None:
                rect = rect.united(QRectF(left[0], left[1], left[2] - left[0], left[3] - left[1]))
            self._items_rect = rect
        return QRectF(self._items_rect)

    def node_item_moved(self, item: NodeItem) -> None:
        """A node moved on screen: frames around it follow, and the bounding rectangle takes it in.
        One that stayed strictly inside it grows it in place; one that was on its edge (it may
        shrink) has it measured again when next asked. Its wires not made yet are made (they follow it)."""
        self._bring_wires(item.node_id)
        if self.frames and any(item.node_id in self.graph.groups[g].nodes for g in self.frames):
            self._fit_frames()
            self._items_rect = None
        now = item.sceneBoundingRect()
        before, item.last_rect = item.last_rect, now
        around = self._items_rect
        if around is not None and before is not None and _strictly_inside(before, around):
            self._items_rect = around.united(now)
        else:
            self._items_rect = None

    # ---------------------------------------------------------------- live state
    def apply_inference(self, inference: Inference) -> int:
        """Paint shapes and problems; returns how many items changed (only those repaint)."""
        self.inference = inference
        # A new network (Input and Output, not wired) is not wrong yet: its missing wire is not painted red.
        by_node = self._by_node = {} if self.graph.is_blank() else inference.errors_by_node()
        errors = {n for n, problems in by_node.items() if n is not None and any(p.severity == "error" for p in problems)}
        recolour = errors != self._errors   # the overview draws nodes without items red too
        self._errors = errors
        texts: dict[tuple[int, ...], str] = {}   # a big graph has few distinct shapes: each written once

        def text_of(shape: tuple[int, ...] | None) -> str:
            if not shape:
                return ""
            found = texts.get(shape)
            if found is None:
                found = texts[shape] = fmt_shape(shape)
            return found

        changed = looks = 0
        for node_id, item in self.nodes.items():
            severity = item.severity
            changed += item.set_state(*self._state(node_id, text_of))
            looks += item.severity != severity
        if looks or recolour:   # what the overview and the far view draw (not a shape: 20,000 blocks redrawn)
            self.contents_changed(geometry=False)
        nodes = self.nodes
        for edge, wire in self.wires.items():
            dst = nodes.get(edge.dst)
            wire.set_label(text_of(inference.edge_shape(edge)), dst is not None and dst.severity == "error")
        self._paint_boxes(inference)
        return changed

    def _state(self, node_id: str, text_of: Callable[[tuple[int, ...] | None], str]) -> tuple[
            str, list[str], str | None]:
        """What a node's item shows of the inference: its output shape, its problems and their severity."""
        assert self.inference is not None
        parts = self.inference.port_shapes.get(node_id)  # a layer with several outputs shows each
        problems = self._by_node.get(node_id, [])
        severity = "error" if any(p.severity == "error" for p in problems) else ("warning" if problems else None)
        text = " | ".join(fmt_shape(s) for s in parts) if parts else text_of(self.inference.shapes.get(node_id))
        return text, [p.message for p in problems], severity

def _stacked(base: float, order: int) -> float:
    """The z value of the ``order``-th node (or wire) item: items made later, out of the graph's order
    (those of a big graph, where the view goes), stack as if they had been made in it (Qt stacks items of
    one z value in the order they were added). Nodes stay under blocks (z 1), wires under nodes."""
    return base + order * 1e-9


def _shape_text(shape: tuple[int, ...] | None) -> str:
    return fmt_shape(shape) if shape else ""


def _strictly_inside(inner: QRectF, outer: QRectF) -> bool:
    return (inner.left() > outer.left() and inner.top() > outer.top() and inner.right() < outer.right()
            and inner.bottom() < outer.bottom())
