"""The nodes and wires without items, drawn straight from the grid when the canvas is zoomed far out.

Below :data:`~graph_editor.ui.items.SIMPLE_LOD` a node is a coloured block and a wire a bare curve: nothing
that needs an item to be drawn. Making the 20,000 items of a 20,000-layer chain for its first Fit View took
2.6-2.9 s of GUI CPU; :func:`sketch_wires` and :func:`sketch_nodes` paint what
:class:`~graph_editor.ui.unbuilt.Unbuilt` knows of an area instead (the node's rectangle and colour, the
wire's ends), as the items would paint it (the same colours, pens and curves; :meth:`NodeItem.paint` and
:meth:`WireItem.paint` at a far zoom). Items are still made where the canvas comes near enough to read them,
or where the mouse acts (a click, a hover, a band), and for a node with marks (frozen, ...), which are items.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPainterPath, QPen

from ..model import Edge, Node
from ..model.geometry import NODE_W, PORT_Y, ROW_H
from .items import RADIUS, lod_of
from .wires import wire_path, wraps

if TYPE_CHECKING:
    from ..model import Graph, Inference
    from .groups import GroupFrame
    from .items import PortItem
    from .style import Theme

Ports = tuple[dict[str, float], dict[str, float], frozenset[str]]   # inputs' and outputs' y, variadic inputs


class Grid(Protocol):
    """What the sketch reads of :class:`~graph_editor.ui.unbuilt.Unbuilt` (which imports this)."""

    rects: dict[str, tuple[float, float, float, float]]
    category: dict[str, str]
    boxes: dict[Edge, tuple[float, float, float, float]]

    def __contains__(self, node_id: object) -> bool: ...

    def nodes_in_order(self, nodes: Iterable[str]) -> list[str]: ...


class SketchedScene(Protocol):
    """What is drawn here reads of the scene (:class:`~graph_editor.ui.scene.GraphScene`, which imports this)."""

    theme: Theme
    unbuilt: Grid
    owner: dict[str, str]
    chosen: set[str]
    frames: dict[str, GroupFrame]
    inference: Inference | None

    @property
    def graph(self) -> Graph: ...

    def errors(self) -> set[str]: ...

    def severity_of(self, node_id: str) -> str | None: ...

    def wire_shown(self, edge: Edge) -> bool: ...

    def port_for(self, node_id: str, port: str, is_input: bool) -> PortItem | None: ...


def sketch_wires(scene: SketchedScene, painter: QPainter, edges: set[Edge]) -> None:
    """Paint the wires of ``edges`` (none made) as :class:`~graph_editor.ui.wires.WireItem` paints them far out,
    under everything else. A wire whose whole room is under a pixel or two lies under the blocks of its two
    nodes (drawn over it, at least a pixel each): it is left out (a 20,000-layer chain fitted has 20,000)."""
    if not edges:
        return
    theme, errors, lod = scene.theme, scene.errors(), lod_of(painter)
    tiny, boxes, unbuilt, owner = 1.5 / lod, scene.unbuilt.boxes, scene.unbuilt, scene.owner
    fans = _Fans(scene)
    ok, bad = QPainterPath(), QPainterPath()
    shown = scene.inference is not None
    for edge in edges:
        box = boxes[edge]
        if box[2] - box[0] < tiny and box[3] - box[1] < tiny and edge.src in unbuilt and edge.dst in unbuilt \
                and edge.src not in owner and edge.dst not in owner:
            continue
        if not scene.wire_shown(edge):
            continue
        a, b = _anchor(scene, edge.src, edge.src_port, False), _anchor(scene, edge.dst, edge.dst_port, True)
        if a is None or b is None:
            continue
        b += QPointF(0, fans.offset(edge))
        path = wire_path(a, b, _band_top(scene, a, b) if wraps(a, b) else None)
        (bad if shown and edge.dst in errors else ok).addPath(path)
    painter.save()
    painter.setRenderHint(QPainter.RenderHint.Antialiasing, lod > 0.3)
    painter.setBrush(Qt.BrushStyle.NoBrush)
    for path, colour in ((ok, theme.wire), (bad, theme.error)):
        if not path.isEmpty():
            painter.setPen(QPen(colour, 1.7))
            painter.drawPath(path)
    painter.restore()


def sketch_nodes(scene: SketchedScene, painter: QPainter, nodes: set[str]) -> None:
    """Paint ``nodes`` (none made) as :class:`~graph_editor.ui.items.NodeItem` paints them far out: a block of
    their category's colour, red in error, bordered as the state says; in the graph's order (where two share
    a pixel, the later one's colour shows), runs of one colour in one call."""
    if not nodes:
        return
    theme, errors, owner, chosen = scene.theme, scene.errors(), scene.owner, scene.chosen
    unbuilt, positions = scene.unbuilt, scene.graph.nodes
    rects, category = unbuilt.rects, unbuilt.category
    blocks = lod_of(painter) * NODE_W < 3   # a few pixels wide: a block of its colour, never thinner than a pixel
    colours: dict[str, QColor] = {}
    painter.save()
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    run: list[QRectF] = []
    run_fill: QColor | None = None
    for n in unbuilt.nodes_in_order(nodes):
        if n in owner:
            continue
        top, bottom = rects[n][1], rects[n][3]
        x, y = positions[n].position
        rect = QRectF(x, y, NODE_W, bottom - top - 6)
        key = "" if n in errors else category[n]
        fill = colours.get(key)
        if fill is None:
            fill = colours[key] = theme.error if n in errors else theme.category_color(key)
        if blocks:
            if fill is not run_fill:
                _blocks(painter, run, run_fill)
                run, run_fill = [], fill
            run.append(rect)
            continue
        severity = scene.severity_of(n)
        selected = n in chosen
        border = theme.selected if selected else theme.error if severity == "error" else (
            theme.warning if severity else theme.node_border)
        painter.setPen(QPen(border, 4.0 if (selected or severity) else 2.0))
        painter.setBrush(fill)
        painter.drawRoundedRect(rect, RADIUS, RADIUS)
    _blocks(painter, run, run_fill)
    painter.restore()


def _blocks(painter: QPainter, rects: list[QRectF], fill: QColor | None) -> None:
    if rects and fill is not None:
        painter.setPen(QPen(fill, 0))   # cosmetic: one screen pixel at any zoom
        painter.setBrush(fill)
        painter.drawRects(rects)


class _Fans:
    """Where each wire ends on a variadic input that takes several (they fan out, as PortItem.anchor says)."""

    def __init__(self, scene: SketchedScene) -> None:
        self._scene = scene
        self._into: dict[tuple[str, str], list[Edge]] | None = None

    def offset(self, edge: Edge) -> float:
        if edge.dst_port not in _ports(self._scene.graph.nodes[edge.dst])[2] or edge.dst in self._scene.owner:
            return 0.0
        if self._into is None:
            self._into = {}
            for e in self._scene.graph.edges:
                self._into.setdefault((e.dst, e.dst_port), []).append(e)
        wires = [e for e in self._into.get((edge.dst, edge.dst_port), []) if self._scene.wire_shown(e)]
        if len(wires) < 2 or edge not in wires:
            return 0.0
        k = wires.index(edge)
        return (k - (len(wires) - 1) / 2) * min(6.0, 16.0 / (len(wires) - 1))


def _anchor(scene: SketchedScene, node_id: str, port: str, is_input: bool) -> QPointF | None:
    """Where a wire meets ``node_id``'s ``port``: its item's (or its block's) port, or where that will be."""
    if node_id not in scene.unbuilt or node_id in scene.owner:
        found = scene.port_for(node_id, port, is_input)
        return None if found is None else found.anchor()
    node = scene.graph.nodes[node_id]
    ins, outs, _ = _ports(node)
    dy = (ins if is_input else outs).get(port)
    if dy is None:
        return None
    x, y = node.position
    return QPointF(x if is_input else x + NODE_W, y + dy)


_PORTS: dict[tuple[str, str], Ports] = {}


def _ports(node: Node) -> Ports:
    """The y of each input and output port in the node's item (NodeItem.refresh places them), by layer look."""
    key = (node.type, repr(node.params) if node.params else "")
    found = _PORTS.get(key)
    if found is None:
        spec = node.spec
        inputs = list(spec.inputs) if spec else []
        outputs = spec.outputs_for(node.params) if spec else []
        found = ({p.name: PORT_Y + k * ROW_H for k, p in enumerate(inputs)},
                 {name: PORT_Y + k * ROW_H for k, name in enumerate(outputs)},
                 frozenset(p.name for p in inputs if p.variadic))
        if len(_PORTS) > 4096:
            _PORTS.clear()
        _PORTS[key] = found
    return found


def _band_top(scene: SketchedScene, a: QPointF, b: QPointF) -> float | None:
    """The top of the outermost open block frame a wire enters to reach ``b`` (WireItem._band_top)."""
    tops = [r.top() for f in scene.frames.values()
            if f.isVisible() and (r := f.sceneBoundingRect()).contains(b) and not r.contains(a)]
    return min(tops) if tops else None
