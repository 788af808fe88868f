"""Automatic layout: a layered drawing of the graph, left to right.

Each node goes into the column of its longest path from an input (its topological
generation) and onto the top row its inputs use; at a fork the branch with the longer way to
go keeps the row, so a block's main path runs straight and its shortcut sits below. Pure Python, so the canvas, the importer and scripts share it.
"""

from __future__ import annotations

from .graph import Graph

DX = 180.0
DY = 140.0


def layered_layout(graph: Graph, dx: float = DX, dy: float = DY) -> dict[str, tuple[float, float]]:
    """Positions for every node: columns ``dx`` apart by generation, rows ``dy`` apart.

    A graph with a cycle gets the nodes on the cycle placed after everything else, so the
    function never fails; validation reports the cycle.
    """
    order = graph.topological_order()
    if order is None:
        order = list(graph.nodes)
    preds: dict[str, list[str]] = {n: [] for n in graph.nodes}
    for e in graph.edges:
        preds[e.dst].append(e.src)
    column: dict[str, int] = {}
    for n in order:
        column[n] = 1 + max((column[p] for p in preds[n] if p in column), default=-1)
    columns: dict[int, list[str]] = {}
    for n in order:
        columns.setdefault(column[n], []).append(n)
    # Longest path to a sink: at a fork the longer branch (a block's main path) keeps the row.
    succs: dict[str, list[str]] = {n: [] for n in graph.nodes}
    for e in graph.edges:
        succs[e.src].append(e.dst)
    reach: dict[str, int] = {}
    for n in reversed(order):
        reach[n] = 1 + max((reach[s] for s in succs[n] if s in reach), default=0)
    row: dict[str, float] = {}
    positions: dict[str, tuple[float, float]] = {}
    for c in sorted(columns):
        # A node wants the top row its inputs use, so a merge brings the chain back up.
        wanted = {n: min((row[p] for p in preds[n] if p in row), default=0.0) for n in columns[c]}
        last = None
        for n in sorted(columns[c], key=lambda n: (wanted[n], -reach[n])):
            # Each node on the row it wants, pushed down when a sibling took that row.
            row[n] = wanted[n] if last is None else max(wanted[n], last + 1.0)
            last = row[n]
            positions[n] = (c * dx, row[n] * dy)
    return positions
