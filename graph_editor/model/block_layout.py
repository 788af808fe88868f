"""The layout of a graph with groups: each group laid out inside, then placed as one box.

Groups are laid out from the deepest up. Inside a group (and at the top), the units are its
sub-groups and its loose nodes; a collapsed sub-group is a unit the size of its block, an
expanded one the size of its laid out contents plus the frame around them. Each scope is a
plain layered layout (:func:`.layout.place`), so a network reads left to right at every
level, and a collapsed block's members sit laid out at the block's place, ready to expand.
"""

from __future__ import annotations

from collections.abc import Callable

from .geometry import box_size, node_size
from .graph import Graph
from .hierarchy import external_ports, parents
from .layout import CHAIN_WRAP_MIN, WRAP_MIN, place

FRAME_MARGIN = 14.0  # the frame the canvas draws around an expanded group's contents
FRAME_HEADER = 22.0

Size = tuple[float, float]
Unit = str | tuple[str, str]  # a node id, or ("group", group id) for a sub-group laid out as one box


def nested_layout(graph: Graph, sizes: dict[str, Size] | None = None, wrap: float | None = None,
                  origin: tuple[float, float] = (0.0, 0.0)) -> dict[str, tuple[float, float]]:
    """Top-left positions for every node of ``graph``, group by group (see the module doc).

    ``sizes`` overrides node sizes (the canvas measures its items); ``wrap`` is passed to
    each scope's layout (by default a scope wider than a screen is cut into bands).
    """
    if not graph.nodes:
        return {}
    sizes = sizes or {}
    up = parents(graph.groups)
    depth = {k: _depth(up, k) for k in graph.groups}
    unit_of = _unit_map(graph, up)

    def node_box(n: str) -> Size:
        return sizes.get(n) or node_size(graph.nodes[n])

    inner: dict[str, dict[str, tuple[float, float]]] = {}  # per group: its nodes, relative to its corner
    extent: dict[str, Size] = {}  # per group: the unit's size in its parent's layout
    for gid in sorted(graph.groups, key=lambda k: -depth[k]):
        rel, (w, h) = _scope(graph, gid, unit_of, node_box, inner, extent, wrap)
        if graph.groups[gid].collapsed:  # its block sits at its members' corner: put that at (0, 0)
            x0, y0 = min(x for x, _ in rel.values()), min(y for _, y in rel.values())
            rel = {n: (x - x0, y - y0) for n, (x, y) in rel.items()}
        inner[gid] = rel
        if graph.groups[gid].collapsed:
            extent[gid] = box_size(external_ports(graph, graph.groups[gid].nodes).count)
        else:
            extent[gid] = (w + 2 * FRAME_MARGIN, h + 2 * FRAME_MARGIN + FRAME_HEADER)
    rel, _ = _scope(graph, None, unit_of, node_box, inner, extent, wrap)
    return {n: (round(x + origin[0], 1), round(y + origin[1], 1)) for n, (x, y) in rel.items()}


def _scope(graph: Graph, gid: str | None, unit_of: Callable[[str, str | None], Unit],
           node_box: Callable[[str], Size], inner: dict, extent: dict,
           wrap: float | None) -> tuple[dict[str, tuple[float, float]], Size]:
    """Lay out the units directly inside ``gid``; returns its nodes' positions and its size."""
    members = graph.groups[gid].nodes if gid is not None else list(graph.nodes)
    units = list(dict.fromkeys(unit_of(n, gid) for n in members))
    inside = set(members)
    edges = {(unit_of(e.src, gid), unit_of(e.dst, gid)) for e in graph.edges
             if e.src in inside and e.dst in inside}
    edges = {(a, b) for a, b in edges if a != b}
    unit_sizes = {u: extent[u[1]] if isinstance(u, tuple) else node_box(u) for u in units}
    # A plain chain of units, entered at one unit only, is cut into bands sooner than one with
    # branches (or a shortcut from outside into its middle), whose wires would cross the bands.
    entries = {unit_of(e.dst, gid) for e in graph.edges if e.dst in inside and e.src not in inside}
    chain = len(entries) <= 1 and all(
        sum(1 for e in edges if e[0] == u) <= 1 and sum(1 for e in edges if e[1] == u) <= 1 for u in units)
    pos = place(units, sorted(edges, key=str), unit_sizes, wrap, wrap_min=CHAIN_WRAP_MIN if chain else WRAP_MIN)
    out: dict[str, tuple[float, float]] = {}
    for u, (x, y) in pos.items():
        if isinstance(u, tuple):  # a sub-group: its members, moved to its place
            child = u[1]
            dx, dy = (0.0, 0.0) if graph.groups[child].collapsed else (FRAME_MARGIN, FRAME_MARGIN + FRAME_HEADER)
            for n, (nx_, ny) in inner[child].items():
                out[n] = (x + dx + nx_, y + dy + ny)
        else:
            out[u] = (x, y)
    width = max(pos[u][0] + unit_sizes[u][0] for u in units)
    height = max(pos[u][1] + unit_sizes[u][1] for u in units)
    return out, (width, height)


def _unit_map(graph: Graph, up: dict[str, str | None]) -> Callable[[str, str | None], Unit]:
    """unit(node, scope): the node itself when it is directly in ``scope``, else ("group",
    the sub-group of ``scope`` that holds it)."""
    innermost: dict[str, str] = {}
    for gid in sorted(graph.groups, key=lambda k: len(graph.groups[k].nodes), reverse=True):
        for n in graph.groups[gid].nodes:
            innermost[n] = gid  # smaller groups come later and win

    def unit(node: str, scope: str | None) -> Unit:
        g = innermost.get(node)
        if g is None or g == scope:
            return node
        while (parent := up[g]) != scope and parent is not None:  # scope is an ancestor of g
            g = parent
        return ("group", g)

    return unit


def _depth(up: dict[str, str | None], gid: str) -> int:
    d, at = 0, up[gid]
    while at is not None:
        d, at = d + 1, up[at]
    return d


# ------------------------------------------------------------------ opening a block in place
Rect = tuple[float, float, float, float]  # x0, y0, x1, y1


def make_room(graph: Graph, gid: str, expand: bool, sizes: dict[str, Size] | None = None
              ) -> dict[str, tuple[float, float]]:
    """New positions that open (``expand``) or close group ``gid`` in place.

    Opening moves the group's members inside the frame it gets; what shares the block's row
    and starts right of it moves right, and what lies wholly below the block moves down, by
    how much the frame is larger than the block. Closing reverses it, so opening then
    closing puts every node back.
    """
    sizes = sizes or {}
    group = graph.groups[gid]
    members = set(group.nodes)
    x0 = min(graph.nodes[n].position[0] for n in group.nodes)
    y0 = min(graph.nodes[n].position[1] for n in group.nodes)
    bw, bh = box_size(external_ports(graph, group.nodes).count)
    ex = _extent(graph, gid, sizes)
    ox, oy = ex[0] - x0, ex[1] - y0  # where the contents start, relative to the corner
    fw = ex[2] - ex[0] + 2 * FRAME_MARGIN
    fh = ex[3] - ex[1] + 2 * FRAME_MARGIN + FRAME_HEADER
    dx, dy = max(0.0, fw - bw), max(0.0, fh - bh)
    sign = 1.0 if expand else -1.0
    mx, my = FRAME_MARGIN - ox, FRAME_MARGIN + FRAME_HEADER - oy  # members into (or out of) the frame
    if not expand:
        x0, y0 = x0 - mx, y0 - my  # the block's corner is where the frame's was
    out: dict[str, tuple[float, float]] = {}
    for unit, rect in _visible_units(graph, sizes, exclude=gid).items():
        nodes = graph.groups[unit[1]].nodes if isinstance(unit, tuple) else [unit]
        left, top, _, bottom = rect
        right_of, below = left > x0 + 1e-6, top >= y0 + bh - 1e-6
        if bottom <= y0 + 1e-6 or not (right_of or below):
            continue  # above the block, or left of it in its row
        shift = (0.0, sign * dy) if below else (sign * dx, 0.0)
        for n in nodes:
            x, y = graph.nodes[n].position
            out[n] = (round(x + shift[0], 1), round(y + shift[1], 1))
    for n in members:
        x, y = graph.nodes[n].position
        out[n] = (round(x + sign * mx, 1), round(y + sign * my, 1))
    return out


def _visible_units(graph: Graph, sizes: dict[str, Size], exclude: str) -> dict[Unit, Rect]:
    """Rectangles of what the canvas shows outside group ``exclude``: blocks and nodes (an
    expanded group's frame is its nodes and blocks)."""
    from .hierarchy import visible

    shown = visible(graph.groups)
    skip = set(graph.groups[exclude].nodes)
    out: dict[Unit, Rect] = {}
    for k in shown.boxes:
        if k == exclude or set(graph.groups[k].nodes) <= skip:
            continue
        nodes = graph.groups[k].nodes
        x = min(graph.nodes[n].position[0] for n in nodes)
        y = min(graph.nodes[n].position[1] for n in nodes)
        w, h = box_size(external_ports(graph, nodes).count)
        out[("group", k)] = (x, y, x + w, y + h)
    for n, node in graph.nodes.items():
        if n not in shown.owner and n not in skip:
            w, h = sizes.get(n) or node_size(node)
            out[n] = (node.position[0], node.position[1], node.position[0] + w, node.position[1] + h)
    return out


def _extent(graph: Graph, gid: str, sizes: dict[str, Size]) -> Rect:
    """The rectangle the group's contents take when it is open (its sub-groups as they are)."""
    up = parents(graph.groups)
    rects: list[Rect] = []
    held: set[str] = set()
    for k in (k for k in graph.groups if up[k] == gid):
        nodes = graph.groups[k].nodes
        held.update(nodes)
        if graph.groups[k].collapsed:
            x = min(graph.nodes[n].position[0] for n in nodes)
            y = min(graph.nodes[n].position[1] for n in nodes)
            w, h = box_size(external_ports(graph, nodes).count)
            rects.append((x, y, x + w, y + h))
        else:
            a = _extent(graph, k, sizes)
            rects.append((a[0] - FRAME_MARGIN, a[1] - FRAME_MARGIN - FRAME_HEADER, a[2] + FRAME_MARGIN,
                          a[3] + FRAME_MARGIN))
    for n in graph.groups[gid].nodes:
        if n not in held:
            (x, y), (w, h) = graph.nodes[n].position, sizes.get(n) or node_size(graph.nodes[n])
            rects.append((x, y, x + w, y + h))
    return (min(r[0] for r in rects), min(r[1] for r in rects), max(r[2] for r in rects), max(r[3] for r in rects))
