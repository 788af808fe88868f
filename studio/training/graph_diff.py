"""What changed between two runs' graphs: nodes added, removed and changed, wires added and
removed. A pure function over graph-file dicts (the shape ``graph_to_dict`` writes and the run
store keeps as each run's snapshot); canvas positions and labels are not changes to the network.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class NodeChange:
    """One node present in both graphs whose type or parameters differ."""

    node_id: str
    type_before: str
    type_after: str
    params: dict[str, tuple[Any, Any]]  # name -> (before, after); absent side is None


@dataclass
class GraphDiff:
    """Differences from graph ``a`` to graph ``b``."""

    added: list[tuple[str, str]] = field(default_factory=list)    # (id, type)
    removed: list[tuple[str, str]] = field(default_factory=list)  # (id, type)
    changed: list[NodeChange] = field(default_factory=list)
    edges_added: list[str] = field(default_factory=list)
    edges_removed: list[str] = field(default_factory=list)
    header: list[str] = field(default_factory=list)  # input spec / class count changes

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed or self.edges_added
                    or self.edges_removed or self.header)

    def lines(self) -> list[str]:
        """A readable listing, one change a line (``+`` added, ``-`` removed, ``~`` changed)."""
        if self.empty:
            return ["The two graphs are the same network."]
        out = list(self.header)
        out += [f"+ {i} ({t})" for i, t in self.added]
        out += [f"- {i} ({t})" for i, t in self.removed]
        for c in self.changed:
            what = [f"type {c.type_before} -> {c.type_after}"] if c.type_before != c.type_after else []
            what += [f"{k}: {_fmt(a)} -> {_fmt(b)}" for k, (a, b) in sorted(c.params.items())]
            out.append(f"~ {c.node_id}: " + ", ".join(what))
        out += [f"+ wire {e}" for e in self.edges_added]
        out += [f"- wire {e}" for e in self.edges_removed]
        return out


def _fmt(v: Any) -> str:
    return "(unset)" if v is None else repr(v)


def _norm(v: Any) -> Any:
    """Tuples and lists compare equal (JSON has no tuples)."""
    if isinstance(v, (list, tuple)):
        return [_norm(x) for x in v]
    return v


def _edge_key(e: dict[str, Any]) -> str:
    return f"{e['src']}.{e.get('src_port', 'out')} -> {e['dst']}.{e.get('dst_port', 'in')}"


def diff_graphs(a: dict[str, Any], b: dict[str, Any]) -> GraphDiff:
    """Compare two graph dicts by node id; raises ValueError naming a malformed side."""
    for label, g in (("first", a), ("second", b)):
        if not isinstance(g, dict) or not isinstance(g.get("nodes"), list):
            raise ValueError(f"the {label} graph has no 'nodes' list")
    na = {n["id"]: n for n in a["nodes"]}
    nb = {n["id"]: n for n in b["nodes"]}
    d = GraphDiff()
    d.added = [(i, nb[i]["type"]) for i in nb if i not in na]
    d.removed = [(i, na[i]["type"]) for i in na if i not in nb]
    for i in na.keys() & nb.keys():
        pa, pb = na[i].get("params", {}) or {}, nb[i].get("params", {}) or {}
        params = {k: (pa.get(k), pb.get(k)) for k in pa.keys() | pb.keys()
                  if _norm(pa.get(k)) != _norm(pb.get(k))}
        if params or na[i]["type"] != nb[i]["type"]:
            d.changed.append(NodeChange(i, na[i]["type"], nb[i]["type"], params))
    d.changed.sort(key=lambda c: c.node_id)
    ea = {_edge_key(e) for e in a.get("edges", [])}
    eb = {_edge_key(e) for e in b.get("edges", [])}
    d.edges_added = sorted(eb - ea)
    d.edges_removed = sorted(ea - eb)
    if _norm(a.get("input")) != _norm(b.get("input")):
        d.header.append(f"~ input: {_fmt(a.get('input'))} -> {_fmt(b.get('input'))}")
    if a.get("num_classes") != b.get("num_classes"):
        d.header.append(f"~ classes: {a.get('num_classes')} -> {b.get('num_classes')}")
    return d
