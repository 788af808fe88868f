"""Layered left-to-right layout: a pure function from a graph to node positions.

Sugiyama-style, kept small: nodes go in columns by topological generation (the longest
path from a source), long wires get virtual nodes so they take part in ordering, the order
within each column is improved by barycentre sweeps (alternately left-to-right and back,
keeping an order only when it crosses fewer wires), and rows are then placed near the
average of their neighbours so chains come out straight. Pure Python (with networkx), so the
canvas, the fx importer and scripts share it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from .graph import Graph

if TYPE_CHECKING:
    import networkx as nx

DEFAULT_SIZE = (150.0, 80.0)
H_GAP = 120.0  # room for the shape label on the wire between two columns
V_GAP = 40.0
BAND_GAP = 140.0
WRAP_MIN = 3000.0  # narrower networks stay in one band
CHAIN_WRAP_MIN = 1500.0  # a plain chain (no branch to cut) is cut into bands sooner
BAND_ASPECT = 550.0  # total width / bands**2: about 16:9 for bands ~300 high
SWEEPS = 8


def layered_layout(graph: Graph, ids: Iterable[str] | None = None,
                   sizes: dict[str, tuple[float, float]] | None = None,
                   wrap: float | None = None) -> dict[str, tuple[float, float]]:
    """Positions (top-left corners) for ``ids`` (default all nodes), flowing left to right.

    ``sizes`` gives node boxes (width, height) so columns and rows do not overlap. A long
    network is cut into bands stacked top to bottom, each at most ``wrap`` wide (by default
    so that the whole reads at about a screen's proportions); ``wrap=math.inf`` keeps one
    band. The laid out block keeps the top-left corner the nodes had before.
    """
    keep = list(graph.nodes) if ids is None else [i for i in dict.fromkeys(ids) if i in graph.nodes]
    if not keep:
        return {}
    inside = set(keep)
    edges = [(e.src, e.dst) for e in graph.edges if e.src in inside and e.dst in inside]
    pos = place(keep, edges, sizes or {}, wrap, lambda n: graph.nodes[n].position[1])
    x0 = min(graph.nodes[i].position[0] for i in keep)
    y0 = min(graph.nodes[i].position[1] for i in keep)
    return {i: (round(pos[i][0] + x0, 1), round(pos[i][1] + y0, 1)) for i in keep}


def place(ids: list, edges: Iterable[tuple], sizes: dict, wrap: float | None = None,
          start_order: Callable[[Any], float] | None = None,
          wrap_min: float = WRAP_MIN) -> dict[Any, tuple[float, float]]:
    """The layered layout of any DAG: ``ids`` with ``edges`` between them (a cycle loses a
    wire), each id a box of ``sizes[id]`` (default DEFAULT_SIZE); top-left corner at (0, 0).
    ``start_order`` ranks ids within a column before crossings are reduced (default: as given);
    with ``wrap`` None, a layout wider than ``wrap_min`` is cut into bands."""
    dag = _acyclic(ids, edges)
    layers = _layers_with_virtuals(dag)
    _reduce_crossings(dag, layers, start_order)
    pos = _coordinates(dag, layers, sizes, wrap, wrap_min)
    real = [p for n, p in pos.items() if not dag.nodes[n].get("virtual")]
    px, py = min(p[0] for p in real), min(p[1] for p in real)
    return {i: (pos[i][0] - px, pos[i][1] - py) for i in ids}


def _acyclic(ids: list, edges: Iterable[tuple]) -> nx.DiGraph:
    import networkx as nx  # imported here: it costs ~0.4 s, and the studio must open fast

    dag = nx.DiGraph()
    dag.add_nodes_from(ids)
    dag.add_edges_from((u, v) for u, v in edges if u != v)
    # A graph being drawn (or a hand-edited file) may have a cycle. Inside each knot of cycles,
    # the wires that run back to a node made earlier are left out of the layering, so the rest
    # reads left to right in the order it was drawn and only those wires are drawn backwards.
    order = {n: i for i, n in enumerate(ids)}
    for knot in nx.strongly_connected_components(dag):
        if len(knot) > 1:
            dag.remove_edges_from([(u, v) for u, v in list(dag.edges(knot)) if v in knot and order[v] < order[u]])
    return dag


def _layers_with_virtuals(dag: nx.DiGraph) -> list[list[Any]]:
    import networkx as nx

    rank = {}
    for depth, generation in enumerate(nx.topological_generations(dag)):
        for n in generation:
            rank[n] = depth
    layers: list[list[Any]] = [[] for _ in range(max(rank.values()) + 1)]  # ids and virtual nodes
    for n in dag.nodes:  # insertion order = the graph's order: a stable start
        layers[rank[n]].append(n)
    for u, v in list(dag.edges):
        if rank[v] - rank[u] > 1:  # a long wire: one virtual node per column it crosses
            dag.remove_edge(u, v)
            prev = u
            for r in range(rank[u] + 1, rank[v]):
                virtual = ("virtual", u, v, r)
                dag.add_node(virtual, virtual=True)
                layers[r].append(virtual)
                dag.add_edge(prev, virtual)
                prev = virtual
            dag.add_edge(prev, v)
    return layers


def _reduce_crossings(dag: nx.DiGraph, layers: list[list], start_order: Callable[[Any], float] | None) -> None:
    if start_order is not None:
        def y_of(n) -> float:
            return 0.0 if dag.nodes[n].get("virtual") else start_order(n)

        for layer in layers:  # start from the order the user drew
            layer.sort(key=y_of)
    # Each node's wires, read from networkx once: the sweeps ask for them for every node of every
    # layer, and networkx's views cost more than the arithmetic (densenet201: ~200,000 asks).
    preds = {n: list(dag.predecessors(n)) for n in dag.nodes}
    succs = {n: list(dag.successors(n)) for n in dag.nodes}
    best = [list(layer) for layer in layers]
    best_crossings = _crossings(succs, layers)
    for sweep in range(SWEEPS):
        down = sweep % 2 == 0
        indices = range(1, len(layers)) if down else range(len(layers) - 2, -1, -1)
        neighbours = preds if down else succs
        for li in indices:
            ref = {n: k for k, n in enumerate(layers[li - 1 if down else li + 1])}

            def barycentre(n, k, ref=ref, neighbours=neighbours) -> float:
                near = [ref[m] for m in neighbours[n] if m in ref]
                return sum(near) / len(near) if near else float(k)

            layers[li] = [n for _, n in sorted(((barycentre(n, k), n) for k, n in enumerate(layers[li])),
                                               key=lambda t: t[0])]
        crossings = _crossings(succs, layers)
        if crossings < best_crossings:
            best, best_crossings = [list(layer) for layer in layers], crossings
    layers[:] = best


def _crossings(succs: dict[Any, list[Any]], layers: list[list]) -> int:
    total = 0
    for left, right in zip(layers, layers[1:], strict=False):
        li = {n: k for k, n in enumerate(left)}
        ri = {n: k for k, n in enumerate(right)}
        wires = sorted((li[u], ri[v]) for u in left for v in succs[u] if v in ri)
        total += _inversions(wires, len(right))
    return total


def _inversions(wires: list[tuple[int, int]], width: int) -> int:
    """Pairs of sorted wires that cross (a before b on the left, after b on the right), counted with
    a Fenwick tree in O(W log W): DenseNet's blocks wire every layer to every later one, and the
    pairwise count took most of a 700-node import."""
    tree = [0] * (width + 1)
    seen, total, start = 0, 0, 0
    while start < len(wires):
        end = start
        while end < len(wires) and wires[end][0] == wires[start][0]:
            end += 1
        for _, y in wires[start:end]:  # earlier sources (strictly left) that end strictly lower
            i, below = y + 1, 0
            while i > 0:
                below += tree[i]
                i -= i & -i
            total += seen - below
        for _, y in wires[start:end]:
            i = y + 1
            while i <= width:
                tree[i] += 1
                i += i & -i
        seen += end - start
        start = end
    return total


def _coordinates(dag: nx.DiGraph, layers: list[list], sizes: dict,
                 wrap: float | None, wrap_min: float = WRAP_MIN) -> dict[object, tuple[float, float]]:
    def size(n) -> tuple[float, float]:
        return (0.0, 0.0) if dag.nodes[n].get("virtual") else sizes.get(n, DEFAULT_SIZE)

    pos: dict[object, tuple[float, float]] = {}
    xs, widths = [], []
    x = 0.0
    for layer in layers:
        # Each row wants the top of its predecessors (ports sit at a fixed height below the
        # top, so chains come out straight); rows keep their order and gaps.
        wants = []
        for n in layer:
            near = [pos[m][1] for m in dag.predecessors(n) if m in pos]
            wants.append(sum(near) / len(near) if near else None)
        ys = _pack(wants, [size(n)[1] for n in layer])
        for n, y in zip(layer, ys, strict=True):
            pos[n] = (x, y)
        xs.append(x)
        widths.append(max((size(n)[0] for n in layer), default=0.0))
        x += widths[-1] + H_GAP
    if wrap is None:
        total = x - H_GAP
        bands = 1 if total <= wrap_min else max(2, round(math.sqrt(total / BAND_ASPECT)))
        wrap = total / bands + max(widths, default=0.0)  # a column may overhang: bands come out even
    return _wrap(pos, layers, xs, widths, size, wrap)


def _wrap(pos: dict, layers: list[list], xs: list[float], widths: list[float], size, wrap: float) -> dict:
    """Cut the columns into bands no wider than ``wrap``, stacked top to bottom."""
    band_of, start, band = [], 0.0, 0
    for x, w in zip(xs, widths, strict=True):
        if x + w - start > wrap and x > start:
            band, start = band + 1, x
        band_of.append((band, start))
    tops: dict[int, float] = {}
    bottoms: dict[int, float] = {}
    for (b, _), layer in zip(band_of, layers, strict=True):
        for n in layer:
            tops[b] = min(tops.get(b, math.inf), pos[n][1])
            bottoms[b] = max(bottoms.get(b, -math.inf), pos[n][1] + size(n)[1])
    offset, shift = 0.0, {}
    for b in sorted(tops):
        shift[b] = offset - tops[b]
        offset += bottoms[b] - tops[b] + BAND_GAP
    out = {}
    for (b, start), layer in zip(band_of, layers, strict=True):
        for n in layer:
            out[n] = (pos[n][0] - start, pos[n][1] + shift[b])
    return out


def _pack(wants: list[float | None], heights: list[float]) -> list[float]:
    """Rows at their wanted heights where possible, in order and at least V_GAP apart; then
    the column shifts so that real rows (not wire bends, of height 0) sit where they want."""
    ys: list[float] = []
    low: float | None = None
    for want, h in zip(wants, heights, strict=True):
        if want is None:
            y = low if low is not None else 0.0
        else:
            y = want if low is None else max(want, low)
        ys.append(y)
        low = y + h + (V_GAP if h else V_GAP / 2)
    weighted = [(w - y, 1.0 if h else 0.02) for w, y, h in zip(wants, ys, heights, strict=True) if w is not None]
    if weighted:
        shift = sum(m * k for m, k in weighted) / sum(k for _, k in weighted)
    else:
        shift = -(ys[-1] + heights[-1] - ys[0]) / 2
    return [y + shift for y in ys]
