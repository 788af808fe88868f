"""Copied nodes as JSON: what goes on the clipboard and how it is read back.

The text is a small, versioned document (nodes with type, params, position and label, the
wires between them, and the groups that lie wholly among them, nested as they were), so
nodes can be pasted into another window or another studio, and a saved block keeps its
inner blocks.
Reading it checks its structure and names what is wrong; parameter values are checked by
the model's commands when pasted.
"""

from __future__ import annotations

import json
from typing import Any

from ..model import Edge, Graph

KIND = "torch-studio-nodes"
VERSION = 1

Placed = tuple[str, str, dict[str, Any], tuple[float, float], str]  # old id, type, params, pos, label


def subgraph_json(graph: Graph, ids: list[str]) -> str:
    """Nodes ``ids`` of ``graph`` and the wires among them, as JSON text."""
    keep = [i for i in ids if i in graph.nodes]
    inside = set(keep)
    return json.dumps({
        "kind": KIND,
        "version": VERSION,
        "nodes": [{"id": n.id, "type": n.type, "params": {k: list(v) if isinstance(v, tuple) else v for k, v in n.params.items()}, "position": list(n.position),
                   "label": n.label} for n in (graph.nodes[i] for i in keep)],
        "edges": [{"src": e.src, "src_port": e.src_port, "dst": e.dst, "dst_port": e.dst_port}
                  for e in graph.edges if e.src in inside and e.dst in inside],
        "groups": [{"name": g.name, "kind": g.kind, "collapsed": g.collapsed, "nodes": list(g.nodes)}
                   for g in graph.groups.values() if g.nodes and set(g.nodes) <= inside],
    }, indent=1)


CopiedGroup = tuple[str, str, bool, list[str]]  # name, kind, collapsed, old node ids


def parse_groups(text: str) -> list[CopiedGroup]:
    """The groups of :func:`subgraph_json` text (already read by :func:`parse_subgraph`),
    outer groups first; ValueError says what is wrong."""
    data = json.loads(text)
    ids = {n["id"] for n in data["nodes"]}
    raw = data.get("groups", [])
    if not isinstance(raw, list):
        raise ValueError("copied 'groups' must be a list")
    out: list[CopiedGroup] = []
    for i, g in enumerate(raw):
        ok = isinstance(g, dict) and isinstance(g.get("name"), str) and isinstance(g.get("kind", ""), str) and \
            isinstance(g.get("collapsed", True), bool) and isinstance(g.get("nodes"), list)
        if not ok or not g["nodes"] or not set(g["nodes"]) <= ids:
            raise ValueError(f"copied group {i} needs a name and nodes among the copied ones")
        out.append((g["name"], g.get("kind", ""), g.get("collapsed", True), list(g["nodes"])))
    return sorted(out, key=lambda g: -len(g[3]))


def parse_subgraph(text: str) -> tuple[list[dict[str, Any]], list[Edge]]:
    """Nodes and wires from :func:`subgraph_json` text; ValueError says what is wrong."""
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, TypeError):
        raise ValueError("the clipboard does not hold Torch Studio nodes (it is not JSON)") from None
    if not isinstance(data, dict) or data.get("kind") != KIND:
        raise ValueError("the clipboard does not hold Torch Studio nodes")
    if data.get("version") != VERSION:
        raise ValueError(f"copied nodes of version {data.get('version')!r} cannot be read (this studio reads "
                         f"{VERSION})")
    nodes, edges = data.get("nodes"), data.get("edges", [])
    if not isinstance(nodes, list) or not nodes:
        raise ValueError("the copied text holds no nodes")
    ids = set()
    for i, n in enumerate(nodes):
        if not isinstance(n, dict) or not isinstance(n.get("id"), str) or not isinstance(n.get("type"), str):
            raise ValueError(f"copied node {i} needs an 'id' and a 'type'")
        if not isinstance(n.get("params", {}), dict):
            raise ValueError(f"copied node '{n['id']}': 'params' must be an object")
        pos = n.get("position", [0, 0])
        if not (isinstance(pos, list) and len(pos) == 2 and all(isinstance(v, int | float) for v in pos)):
            raise ValueError(f"copied node '{n['id']}': 'position' must be [x, y]")
        ids.add(n["id"])
    wires = []
    for i, e in enumerate(edges if isinstance(edges, list) else [None]):
        if not isinstance(e, dict) or e.get("src") not in ids or e.get("dst") not in ids:
            raise ValueError(f"copied wire {i} must join two copied nodes")
        wires.append(Edge(e["src"], e["dst"], str(e.get("src_port", "out")), str(e.get("dst_port", "in"))))
    return nodes, wires


def place(nodes: list[dict[str, Any]], at: tuple[float, float] | None, offset: float) -> list[Placed]:
    """Positions for pasted nodes: their top-left corner at ``at``, or shifted by ``offset``."""
    xs = [float(n.get("position", [0, 0])[0]) for n in nodes]
    ys = [float(n.get("position", [0, 0])[1]) for n in nodes]
    dx, dy = (at[0] - min(xs), at[1] - min(ys)) if at is not None else (offset, offset)
    return [(n["id"], n["type"], dict(n.get("params", {})), (x + dx, y + dy), str(n.get("label", "")))
            for n, x, y in zip(nodes, xs, ys, strict=True)]
