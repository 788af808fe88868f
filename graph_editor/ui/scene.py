"""The scene: canvas items that mirror a graph, kept in step by the graph's events.

The scene knows nothing of editing: it follows ``graph.events`` to add, remove and redraw
items, and :meth:`GraphScene.apply_inference` paints shapes and problems. It is used by
the editing canvas and, alone, by the thumbnail renderer.
"""

from __future__ import annotations

from collections.abc import Iterator

from PySide6.QtCore import QObject, QPointF, QRect, QRectF, Qt
from PySide6.QtGui import QPainter, QTransform
from PySide6.QtWidgets import QGraphicsItem, QGraphicsScene, QGraphicsSceneHelpEvent, QToolTip

from ..model import Edge, Graph, Group, Inference, Node, fmt_shape
from ..model.hierarchy import parents, visible
from .background import collection_paused
from .groups import GroupBox, GroupFrame
from .items import NodeItem, PortItem
from .look import Metrics
from .marks import TrainingMarks
from .style import DARK, Fonts, Theme
from .wires import WireItem, wraps


class GraphScene(QGraphicsScene):
    """Items for every node, wire and group of ``graph``."""

    def __init__(self, graph: Graph, theme: Theme = DARK, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.theme = theme
        self.fonts = Fonts()
        self.metrics = Metrics(self.fonts)
        self.nodes: dict[str, NodeItem] = {}
        self.wires: dict[Edge, WireItem] = {}
        self.boxes: dict[str, GroupBox] = {}
        self.frames: dict[str, GroupFrame] = {}
        self.owner: dict[str, str] = {}  # hidden node -> the block it is drawn in
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
            _release(item)
        for box in self.boxes.values():
            _release(box)

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
        self.inference = None
        self.stats = None
        self._graph = graph
        for node_id in graph.nodes:
            self._on_node_added(node_id)
        for edge in graph.edges:
            self._on_edge_added(edge)
        self._on_groups_changed()
        self._follow(graph, True)
        self.marks.sync()
        self.contents_changed()

    def render_items(self, painter: QPainter, target: QRectF, source: QRectF) -> None:
        """Paint the items in ``source`` into ``target`` without the scene's background (the far view's
        tiles: the view draws its own grid under them)."""
        self._bare = True
        try:
            self.render(painter, target, source, Qt.AspectRatioMode.IgnoreAspectRatio)
        finally:
            self._bare = False

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

    def make_box(self, group: Group) -> GroupBox:
        """The block that draws collapsed ``group`` (a seam, like :meth:`make_node_item`)."""
        return GroupBox(self.graph, group)

    def _on_node_added(self, node_id: str) -> None:
        item = self.make_node_item(self.graph.nodes[node_id])
        if not self._caching:
            item.setCacheMode(QGraphicsItem.CacheMode.NoCache)
        self.nodes[node_id] = item
        self.addItem(item)
        self.contents_changed()

    def _on_node_removed(self, node_id: str) -> None:
        item = self.nodes.pop(node_id, None)
        if item is not None:
            self.removeItem(item)
            _release(item)
            self.contents_changed()

    def _on_edge_added(self, edge: Edge) -> None:
        src, dst = self.port_for(edge.src, edge.src_port, False), self.port_for(edge.dst, edge.dst_port, True)
        if src is None or dst is None:
            return  # a wire to a port the layer does not have: validation reports it
        wire = WireItem(edge, src, dst)
        if not self._caching:
            wire.setCacheMode(QGraphicsItem.CacheMode.NoCache)
        self.wires[edge] = wire
        self.addItem(wire)
        wire.update_path()
        if self.inference is not None:
            shape = self.inference.edge_shape(edge)
            wire.set_label(fmt_shape(shape) if shape else "")
        for other in dst.wires:     # a variadic port spreads its wires' ends
            if other is not wire:
                other.update_path()
        if not self.wire_shown(edge):
            wire.hide()
        if self._touches_box(edge):
            self._on_groups_changed()  # the box gains a port

    def _on_edge_removed(self, edge: Edge) -> None:
        wire = self.wires.pop(edge, None)
        if wire is not None:
            wire.detach()
            self.removeItem(wire)
        if self._touches_box(edge):
            self._on_groups_changed()

    def _touches_box(self, edge: Edge) -> bool:
        return bool(self.boxes) and self.owner.get(edge.src) != self.owner.get(edge.dst)

    def _on_params_changed(self, node_id: str, name: str) -> None:
        item = self.nodes.get(node_id)
        if item is not None:
            item.refresh(self.graph.nodes[node_id])
            self.contents_changed()   # its height follows its parameter rows

    def _on_node_moved(self, node_id: str) -> None:
        item = self.nodes.get(node_id)
        if item is not None and not self.dragging:
            item.setPos(*self.graph.nodes[node_id].position)
            item.follow()
            gid = self.owner.get(node_id)
            if gid is not None:
                members = [self.graph.nodes[n].position for n in self.graph.groups[gid].nodes]
                self.boxes[gid].setPos(min(p[0] for p in members), min(p[1] for p in members))
            self._fit_frames()
            self.contents_changed()

    def _on_groups_changed(self) -> None:
        had_owners = bool(self.owner)
        for item in (*self.boxes.values(), *self.frames.values()):
            self.removeItem(item)
        for box in self.boxes.values():
            _release(box)
        self.boxes.clear()
        self.frames.clear()
        shown = visible(self.graph.groups)
        self.owner = shown.owner
        up = parents(self.graph.groups)
        for gid in shown.boxes:
            box = self.make_box(self.graph.groups[gid])
            self.boxes[gid] = box
            self.addItem(box)
        for gid in shown.frames:
            depth, at = 0, up[gid]
            while at is not None:
                depth, at = depth + 1, up[at]
            frame = GroupFrame(self.graph.groups[gid], depth)
            self.frames[gid] = frame
            self.addItem(frame)
        if had_owners or self.owner:   # else no node was or is inside a closed block: nothing to re-wire
            self._rebind_wires()
        self._fit_frames()
        if self.inference is not None:
            self._paint_boxes(self.inference)
        self._paint_box_stats()
        self.contents_changed()

    def _rebind_wires(self) -> None:
        """Nodes inside closed blocks hidden, the others shown; each wire between the ports that stand
        for its ends now (a block's, or its node's)."""
        for node_id, item in self.nodes.items():
            item.setVisible(node_id not in self.owner)
        for edge, wire in self.wires.items():
            src, dst = self.port_for(edge.src, edge.src_port, False), self.port_for(edge.dst, edge.dst_port, True)
            if src is not None and dst is not None:
                wire.rebind(src, dst)
            wire.setVisible(self.wire_shown(edge))

    # ---------------------------------------------------------------- lookups
    def collapsed_owner(self, node_id: str) -> str | None:
        """The block (collapsed group) ``node_id`` is hidden in, if any."""
        return self.owner.get(node_id)

    def port_for(self, node_id: str, port: str, is_input: bool) -> PortItem | None:
        """The visible port item that stands for a node's port (a group box's when collapsed)."""
        owner = self.collapsed_owner(node_id)
        if owner is not None:
            box = self.boxes[owner]
            ports = box.in_ports if is_input else box.out_ports
            found = ports.get((node_id, port))
            if found is not None:
                return found
        item = self.nodes.get(node_id)
        if item is None:
            return None
        return (item.in_ports if is_input else item.out_ports).get(port)

    def wire_shown(self, edge: Edge) -> bool:
        a, b = self.owner.get(edge.src), self.owner.get(edge.dst)
        return a is None or a != b

    def node_sizes(self) -> dict[str, tuple[float, float]]:
        """(width, height) of every node box, for the auto-layout."""
        return {k: (v.boundingRect().width() - 6, v.height) for k, v in self.nodes.items()}

    def items_rect(self) -> QRectF:
        """The rectangle around every visible node, box and frame (measured once per change: the
        overview and the view's fit ask for it on every scroll)."""
        if self._items_rect is None:
            rect = QRectF()
            for item in (*self.nodes.values(), *self.boxes.values(), *self.frames.values()):
                if item.isVisible():
                    rect = rect.united(item.sceneBoundingRect())
            self._items_rect = rect
        return QRectF(self._items_rect)

    def node_item_moved(self, item: NodeItem) -> None:
        """A node moved on screen: frames around it follow, and the bounding rectangle takes it in.
        One that stayed strictly inside it grows it in place; one that was on its edge (it may
        shrink) has it measured again when next asked."""
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

    def _fit_frames(self) -> None:
        """Each frame around its visible contents: nodes, blocks and (fitted first) inner frames."""
        groups = self.graph.groups
        for gid in sorted(self.frames, key=lambda g: -self.frames[g].depth):
            members = set(groups[gid].nodes)
            rects = [self.nodes[n].sceneBoundingRect() for n in groups[gid].nodes
                     if n in self.nodes and n not in self.owner]
            rects += [b.sceneBoundingRect() for k, b in self.boxes.items() if set(groups[k].nodes) <= members]
            rects += [f.rect for k, f in self.frames.items()
                      if k != gid and set(groups[k].nodes) < members and not f.rect.isEmpty()]
            self.frames[gid].fit(rects, whole=not self._others_within(rects, members))
        if self.frames:
            self._items_rect = None
        self.marks.sync()     # an open block's tags sit in its header, which moved
        if self.frames:   # a wire that wraps to the next band runs above the frames it enters: they moved
            for wire in self.wires.values():
                if wire.isVisible() and wraps(wire.src.anchor(wire), wire.dst.anchor(wire)):
                    wire.update_path()

    def _others_within(self, rects: list[QRectF], members: set[str]) -> bool:
        """Whether a node or block outside ``members`` lies within the rectangle around ``rects``."""
        around = QRectF()
        for r in rects:
            around = around.united(r)
        groups = self.graph.groups
        for n, item in self.nodes.items():
            if n not in members and n not in self.owner and item.sceneBoundingRect().intersects(around):
                return True
        return any(not set(groups[k].nodes) <= members and b.sceneBoundingRect().intersects(around)
                   for k, b in self.boxes.items())

    # ---------------------------------------------------------------- live state
    def apply_inference(self, inference: Inference) -> int:
        """Paint shapes and problems; returns how many items changed (only those repaint)."""
        self.inference = inference
        # A new network (Input and Output, not wired) is not wrong yet: its missing wire is not painted red.
        by_node = {} if self.graph.is_blank() else inference.errors_by_node()
        texts: dict[tuple[int, ...], str] = {}   # a big graph has few distinct shapes: each written once

        def text_of(shape: tuple[int, ...] | None) -> str:
            if not shape:
                return ""
            found = texts.get(shape)
            if found is None:
                found = texts[shape] = fmt_shape(shape)
            return found

        changed = 0
        for node_id, item in self.nodes.items():
            parts = inference.port_shapes.get(node_id)  # a layer with several outputs shows each
            problems = by_node.get(node_id, [])
            severity = "error" if any(p.severity == "error" for p in problems) else (
                "warning" if problems else None)
            text = " | ".join(fmt_shape(s) for s in parts) if parts else text_of(inference.shapes.get(node_id))
            changed += item.set_state(text, [p.message for p in problems], severity)
        if changed:
            self.contents_changed(geometry=False)   # the overview draws errors red
        nodes = self.nodes
        for edge, wire in self.wires.items():
            dst = nodes.get(edge.dst)
            wire.set_label(text_of(inference.edge_shape(edge)), dst is not None and dst.severity == "error")
        self._paint_boxes(inference)
        return changed

    def _paint_boxes(self, inference: Inference) -> None:
        by_node = inference.errors_by_node()
        for gid, box in self.boxes.items():
            members = self.graph.groups[gid].nodes
            outs = list(box.out_ports)
            shapes = list(dict.fromkeys(fmt_shape(s) for n, p in outs if (s := inference.shape_at(n, p))))
            ins = list(dict.fromkeys(fmt_shape(s) for n, p in box.sources if (s := inference.shape_at(n, p))))
            problems = [p for n in members for p in by_node.get(n, [])]
            box.set_state(", ".join(shapes), any(p.severity == "error" for p in problems),
                          [str(p) for p in problems], ", ".join(ins))

    def apply_stats(self, stats: dict[str, tuple[int, int]] | None) -> None:
        """Parameters and FLOPs per node (from the torch analysis; None when it failed): the
        blocks show their members' sums."""
        self.stats = stats
        self._paint_box_stats()

    def _paint_box_stats(self) -> None:
        for gid, box in self.boxes.items():
            if self.stats is None:
                box.set_stats(None, None)
                continue
            members = [self.stats.get(n, (0, 0)) for n in self.graph.groups[gid].nodes]
            box.set_stats(sum(p for p, _ in members), sum(f for _, f in members))


def _release(item: NodeItem | GroupBox) -> None:
    """Cut the cycles between ``item``, its ports and their wires (it is leaving the scene)."""
    for port in (*item.in_ports.values(), *item.out_ports.values()):
        port.wires.clear()
    item.in_ports.clear()
    item.out_ports.clear()


def _strictly_inside(inner: QRectF, outer: QRectF) -> bool:
    return (inner.left() > outer.left() and inner.top() > outer.top() and inner.right() < outer.right()
            and inner.bottom() < outer.bottom())
