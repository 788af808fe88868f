"""The nodes and wires of a big graph whose canvas items are not made yet.

A 20,000-layer chain shows a few dozen nodes at a readable zoom, yet making an item for each of its
20,000 nodes and 20,000 wires took ~1 s of a 2.1-2.6 s open. A big graph's scene
(:attr:`~graph_editor.ui.scene.GraphScene.LAZY_FROM` nodes) starts with no items: :class:`Unbuilt` keeps,
for every node without one, the rectangle its item will have (:func:`~graph_editor.ui.items.node_rect`,
from the model: exactly the item's bounds) and its category, and for every wire not made the rectangle
around its ends; both in a grid of the scene, so that a view asks cheaply what lies in the area it is
about to paint (:meth:`Unbuilt.near`). The overview, the fit and the auto-layout read the rectangles: they
see the whole graph as before.

A wire is made when both its nodes are; a node made brings its wires (and the nodes at their other ends,
one step) with it, so a node on screen never lacks a wire. A wire not made whose rectangle meets an area
is found by :meth:`near` too, so a long wire between two nodes off screen is drawn where it crosses it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, cast

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QPainter, QTransform

from ..model import Edge, Graph, Problem
from .background import collection_paused, freeze_survivors
from .far_sketch import SketchedScene, sketch_nodes, sketch_wires
from .items import NodeItem, node_rect

if TYPE_CHECKING:
    from .marks import TrainingMarks

CELL = 2048.0        # scene units a side of the grid's cells
LONG_CELLS = 64      # a wire spanning more cells than this is kept in a list checked on every query
FREEZE_BATCH = 1000  # nodes made at once from which their items are left out of the collector's walks
WIRE_ROOM = 150.0    # how far a wire's curve and label reach past its ends (arcs over a row, wraps, labels)

Rect = tuple[float, float, float, float]   # left, top, right, bottom (scene coordinates)
Cell = tuple[int, int]


class Unbuilt:
    """Nodes and edges of the scene's graph whose items are not made yet, found by where they are."""

    def __init__(self) -> None:
        self.rects: dict[str, Rect] = {}          # node -> the rectangle its item will have
        self.category: dict[str, str] = {}        # node -> its layer category (the overview's colour)
        self.edges_of: dict[str, set[Edge]] = {}  # node (made or not) -> its edges not made
        self._order: dict[Edge, int] = {}         # edge -> its place among the graph's edges (wires are made in it)
        self._node_order: dict[str, int] = {}     # node -> its place among the graph's nodes (items stack in it)
        self.boxes: dict[Edge, Rect] = {}         # edge not made -> the rectangle around its ends
        self._long: set[Edge] = set()
        self._node_cells: dict[Cell, set[str]] = {}
        self._edge_cells: dict[Cell, set[Edge]] = {}
        self._bounds: Rect | None = None          # around every rectangle in ``rects``, measured when asked

    def __bool__(self) -> bool:
        return bool(self.rects) or bool(self.boxes)

    def __contains__(self, node_id: object) -> bool:
        return node_id in self.rects

    # ---------------------------------------------------------------- what is left
    def add_node(self, node_id: str, rect: Rect, category: str, order: int) -> None:
        self.rects[node_id] = rect
        self._node_order[node_id] = order
        self.category[node_id] = category
        for cell in _cells(rect):
            self._node_cells.setdefault(cell, set()).add(node_id)
        self._bounds = None

    def add_edge(self, edge: Edge, order: int, a: Rect, b: Rect) -> None:
        """An edge whose wire is not made, between nodes whose rectangles are ``a`` and ``b``."""
        self._order[edge] = order
        self.edges_of.setdefault(edge.src, set()).add(edge)
        self.edges_of.setdefault(edge.dst, set()).add(edge)
        self._index_edge(edge, a, b)

    def _index_edge(self, edge: Edge, a: Rect, b: Rect) -> None:
        box = (min(a[0], b[0]) - WIRE_ROOM, min(a[1], b[1]) - WIRE_ROOM, max(a[2], b[2]) + WIRE_ROOM,
               max(a[3], b[3]) + WIRE_ROOM)
        self.boxes[edge] = box
        if _short(box):   # found through its ends (see near): most wires, and no cells to fill
            return
        if _span(box) > LONG_CELLS:
            self._long.add(edge)
            return
        for cell in _cells(box):
            self._edge_cells.setdefault(cell, set()).add(edge)

    def _unindex_edge(self, edge: Edge) -> None:
        box = self.boxes.pop(edge)
        if _short(box):
            return
        if edge in self._long:
            self._long.discard(edge)
            return
        for cell in _cells(box):
            found = self._edge_cells.get(cell)
            if found is not None:
                found.discard(edge)
                if not found:
                    del self._edge_cells[cell]

    def drop_node(self, node_id: str) -> None:
        """``node_id`` has its item now, or left the graph (its edges stay until they are made or removed)."""
        rect = self.rects.pop(node_id, None)
        if rect is None:
            return
        del self.category[node_id]
        del self._node_order[node_id]
        for cell in _cells(rect):
            found = self._node_cells.get(cell)
            if found is not None:
                found.discard(node_id)
                if not found:
                    del self._node_cells[cell]
        self._bounds = None

    def drop_edge(self, edge: Edge) -> None:
        """The wire of ``edge`` is made now, or the edge left the graph."""
        if edge not in self.boxes:
            return
        self._unindex_edge(edge)
        del self._order[edge]
        for end in (edge.src, edge.dst):
            left = self.edges_of.get(end)
            if left is not None:
                left.discard(edge)
                if not left:
                    del self.edges_of[end]

    def move(self, node_id: str, rect: Rect, rect_of: Callable[[str], Rect]) -> None:
        """Node ``node_id`` (no item yet) moved or changed size to ``rect``; the rectangles of its edges
        follow (``rect_of``: where a node is, with an item or not)."""
        category, order = self.category[node_id], self._node_order[node_id]
        self.drop_node(node_id)
        self.add_node(node_id, rect, category, order)
        for edge in self.edges_of.get(node_id, ()):
            self._unindex_edge(edge)
            self._index_edge(edge, rect_of(edge.src), rect_of(edge.dst))

    # ---------------------------------------------------------------- queries
    def edges(self) -> Iterable[Edge]:
        """Every edge whose wire is not made."""
        return self.boxes.keys()

    def order_of(self, node_id: str) -> int:
        return self._node_order[node_id]

    def order_of_edge(self, edge: Edge) -> int:
        return self._order[edge]

    def in_order(self, edges: Iterable[Edge]) -> list[Edge]:
        """``edges`` in the order the graph lists them (a variadic port spreads its wires in that order)."""
        return sorted(edges, key=lambda e: self._order.get(e, 0))

    def nodes_in_order(self, nodes: Iterable[str]) -> list[str]:
        """Those of ``nodes`` without items, in the order the graph lists them (items made in it stack as
        they would have had they been made at once)."""
        return sorted((n for n in nodes if n in self.rects), key=self._node_order.__getitem__)

    def near(self, area: Rect) -> tuple[set[str], set[Edge]]:
        """The nodes not made whose rectangle meets ``area``, and the edges not made whose rectangle does.
        A short edge (its rectangle at most a cell a side) is found through its nodes without items: one
        of them lies within a cell of any area its rectangle meets."""
        whole = self._whole()
        if whole is not None and _inside(whole, area):   # the whole graph in it (fitted): everything, unsorted
            return set(self.rects), set(self.boxes)
        reach = (area[0] - CELL, area[1] - CELL, area[2] + CELL, area[3] + CELL)
        around = [n for n in _found(self._node_cells, reach) if _meets(self.rects[n], reach)]
        nodes = {n for n in around if _meets(self.rects[n], area)}
        boxes = self.boxes
        edges = {e for n in around for e in self.edges_of.get(n, ()) if _meets(boxes[e], area)}
        edges.update(e for e in _found(self._edge_cells, area) if _meets(boxes[e], area))
        edges.update(e for e in self._long if _meets(boxes[e], area))
        return nodes, edges

    def _whole(self) -> Rect | None:
        """Around every node rectangle and every wire not made."""
        nodes = self.bounds({})
        if nodes is None or not self.boxes:
            return _around(self.boxes.values()) if nodes is None else nodes
        room = WIRE_ROOM   # a wire's rectangle is its ends' with this room: past the nodes by at most this
        return nodes[0] - room, nodes[1] - room, nodes[2] + room, nodes[3] + room

    def bounds(self, hidden: dict[str, str]) -> Rect | None:
        """The rectangle around the nodes not made, those in ``hidden`` (inside closed blocks) aside."""
        if hidden:
            return _around(r for n, r in self.rects.items() if n not in hidden)
        if self._bounds is None:
            self._bounds = _around(self.rects.values())
        return self._bounds


class LazyItems:
    """Mixed into :class:`~graph_editor.ui.scene.GraphScene`: the items of a big graph made where a view
    looks (:meth:`realize`), and what the overview, the fit and the frames read of every node, made or not."""

    nodes: dict[str, NodeItem]
    owner: dict[str, str]
    unbuilt: Unbuilt
    _errors: set[str]
    _by_node: dict[str | None, list[Problem]]
    _bare: bool
    marks: TrainingMarks
    render: Callable[..., None]
    _make_node: Callable[[str, int | None], NodeItem]
    _make_wire: Callable[[Edge, int], None]

    if TYPE_CHECKING:
        @property
        def graph(self) -> Graph: ...

    def _defer_all(self, graph: Graph) -> None:
        """Every node and edge of ``graph`` known by where it is, none made (see :mod:`.unbuilt`)."""
        rects: dict[str, Rect] = {}
        looks: dict[tuple[str, str], tuple[Rect, str]] = {}   # layers alike are drawn alike: measured once
        for k, node in enumerate(graph):
            key = (node.type, repr(node.params) if node.params else "")
            found = looks.get(key)
            if found is None:
                spec = node.spec
                x, y = node.position
                left, top, right, bottom = node_rect(node)
                found = looks[key] = (left - x, top - y, right - x, bottom - y), spec.category if spec else ""
            (left, top, right, bottom), category = found
            x, y = node.position
            rects[node.id] = rect = (x + left, y + top, x + right, y + bottom)
            self.unbuilt.add_node(node.id, rect, category, k)
        for k, edge in enumerate(graph.edges):
            a, b = rects.get(edge.src), rects.get(edge.dst)
            if a is not None and b is not None:
                self.unbuilt.add_edge(edge, k, a, b)

    def realize(self, area: QRectF) -> int:
        """Make the items of the nodes and wires in ``area`` (scene coordinates) that have none yet: a view
        asks before it paints it. Returns how many nodes got items."""
        if not self.unbuilt:
            return 0
        nodes, edges = self.unbuilt.near((area.left(), area.top(), area.right(), area.bottom()))
        return self._make(nodes, edges) if nodes or edges else 0

    def render_items(self, painter: QPainter, target: QRectF, source: QRectF) -> None:
        """Paint ``source`` (scene coordinates) into ``target`` as the canvas shows it zoomed far out, without
        the scene's background (the view draws its grid under it): the items made, and the nodes and wires
        without items sketched from the grid (:mod:`~graph_editor.ui.far_sketch`; wires under the items,
        nodes over them), none made for it."""
        nodes, edges = self.unbuilt.near((source.left(), source.top(), source.right(), source.bottom())) \
            if self.unbuilt else (set(), set())
        to_target = QTransform.fromTranslate(-source.left(), -source.top()) * QTransform.fromScale(
            target.width() / source.width(), target.height() / source.height()) * QTransform.fromTranslate(
            target.left(), target.top())
        painter.save()
        painter.setClipRect(target)
        painter.setTransform(to_target, True)
        sketch_wires(cast("SketchedScene", self), painter, edges)   # the GraphScene it is mixed into
        painter.restore()
        self._bare = True
        try:
            self.render(painter, target, source, Qt.AspectRatioMode.IgnoreAspectRatio)
        finally:
            self._bare = False
        painter.save()
        painter.setClipRect(target)
        painter.setTransform(to_target, True)
        sketch_nodes(cast("SketchedScene", self), painter, nodes)
        painter.restore()

    def errors(self) -> set[str]:
        """The nodes in error in the inference shown."""
        return self._errors

    def severity_of(self, node_id: str) -> str | None:
        """What its item would show: "error", "warning" or None."""
        problems = self._by_node.get(node_id, [])
        return "error" if any(p.severity == "error" for p in problems) else ("warning" if problems else None)

    def realize_all(self) -> None:
        """Make every item (a picture of the whole graph: the thumbnail)."""
        if self.unbuilt:
            self._make(set(self.unbuilt.rects), set(self.unbuilt.edges()))

    def unmade(self, node_id: str) -> bool:
        """Whether ``node_id`` has no item yet."""
        return node_id in self.unbuilt

    def make_items(self, node_ids: list[str]) -> None:
        """Items for those of ``node_ids`` without one (nodes whose marks must show however far out)."""
        self._make({n for n in node_ids if n in self.unbuilt}, set())

    def item_for(self, node_id: str) -> NodeItem | None:
        """The item of ``node_id``, made now if it had none (a node brought into view from elsewhere)."""
        if node_id in self.unbuilt:
            self._make({node_id}, set())
        return self.nodes.get(node_id)

    def _make(self, nodes: set[str], edges: set[Edge]) -> int:
        """Items for ``nodes`` and the wires of ``edges`` and of those nodes (with the nodes at their other
        ends: a node never shows without its wires)."""
        unbuilt = self.unbuilt
        for n in nodes:
            edges |= unbuilt.edges_of.get(n, set())
        todo = unbuilt.nodes_in_order(nodes | {end for e in edges for end in (e.src, e.dst)})
        with collection_paused():
            for n in todo:
                self._make_node(n, unbuilt.order_of(n))
            for edge in unbuilt.in_order(edges):
                order = unbuilt.order_of_edge(edge)
                unbuilt.drop_edge(edge)
                self._make_wire(edge, order)
            if len(todo) >= FREEZE_BATCH:   # before the collector resumes, as the controller does for a big
                freeze_survivors()          # graph's items made at once: its first walk would take them all
        if todo:
            self.marks.sync()   # a node made now may carry a mark (frozen, a learning-rate multiplier...)
        return len(todo)

    def _rect_of(self, node_id: str) -> Rect:
        """Where a node is drawn, with an item or not."""
        found = self.unbuilt.rects.get(node_id)
        if found is not None:
            return found
        r = self.nodes[node_id].sceneBoundingRect()
        return r.left(), r.top(), r.right(), r.bottom()

    def node_rect_of(self, node_id: str) -> QRectF:
        """The scene rectangle of ``node_id``'s item, made or not."""
        left, top, right, bottom = self._rect_of(node_id)
        return QRectF(left, top, right - left, bottom - top)

    def _node_rects(self) -> Iterator[tuple[str, QRectF]]:
        """Every node's rectangle and id, with an item or not (those inside closed blocks too)."""
        for n, item in self.nodes.items():
            yield n, item.sceneBoundingRect()
        for n, (left, top, right, bottom) in self.unbuilt.rects.items():
            yield n, QRectF(left, top, right - left, bottom - top)

    def node_blocks(self) -> Iterator[tuple[float, float, float, float, str]]:
        """(x, y, width, height, colour key) of every node shown (not inside a closed block), with an item
        or not: what the overview draws. The key is the node's category, "" for a node in error. In the
        graph's order while some have no items (the order their items would have been made in: where two
        share a pixel of the overview, the later one's colour shows)."""
        items = self.nodes
        errors, owner, category, rects = self._errors, self.owner, self.unbuilt.category, self.unbuilt.rects
        for n in self.graph.nodes if rects else items:
            item = items.get(n)
            if item is not None:
                if item.isVisible():
                    r = item.sceneBoundingRect()
                    yield r.x(), r.y(), r.width(), r.height(), "" if item.severity == "error" else item.category
            elif n in rects and n not in owner:
                left, top, right, bottom = rects[n]
                yield left, top, right - left, bottom - top, "" if n in errors else category[n]

    def _bring_wires(self, node_id: str) -> None:
        """A node with an item moved: its wires still without items (to nodes off screen) are made."""
        left = self.unbuilt.edges_of.get(node_id)
        if left:
            self._make(set(), set(left))


def _cells(rect: Rect) -> Iterator[Cell]:
    x0, y0, x1, y1 = (int(v // CELL) for v in rect)
    for cx in range(x0, x1 + 1):
        for cy in range(y0, y1 + 1):
            yield cx, cy


def _span(rect: Rect) -> int:
    return (int(rect[2] // CELL) - int(rect[0] // CELL) + 1) * (int(rect[3] // CELL) - int(rect[1] // CELL) + 1)


def _found(cells: dict[Cell, set], area: Rect) -> Iterator:
    """What the cells under ``area`` hold (each cell's contents once; far zoomed out, where the area
    covers more cells than are filled, the filled cells are read instead of every cell under it)."""
    if _span(area) <= len(cells):
        for cell in _cells(area):
            yield from cells.get(cell, ())
        return
    x0, y0, x1, y1 = (int(v // CELL) for v in area)
    for (cx, cy), held in cells.items():
        if x0 <= cx <= x1 and y0 <= cy <= y1:
            yield from held


def _inside(inner: Rect, outer: Rect) -> bool:
    return outer[0] <= inner[0] and outer[1] <= inner[1] and inner[2] <= outer[2] and inner[3] <= outer[3]


def _short(box: Rect) -> bool:
    return box[2] - box[0] <= CELL and box[3] - box[1] <= CELL


def _meets(a: Rect, b: Rect) -> bool:
    return a[0] <= b[2] and b[0] <= a[2] and a[1] <= b[3] and b[1] <= a[3]


def _around(rects: Iterable[Rect]) -> Rect | None:
    left = top = float("inf")
    right = bottom = float("-inf")
    for r in rects:
        left, top, right, bottom = min(left, r[0]), min(top, r[1]), max(right, r[2]), max(bottom, r[3])
    return None if left == float("inf") else (left, top, right, bottom)
