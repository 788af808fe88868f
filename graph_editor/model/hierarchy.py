"""Groups inside groups: a network's module hierarchy (a ResNet stage > its blocks).

A :class:`~graph_editor.model.graph.Group` lists every node inside it, its sub-groups'
nodes included, so any two groups are either apart or one holds the other. Nesting is not
stored: a group's parent is the smallest group that holds all of its nodes. What the canvas
shows follows from the collapsed flags: a collapsed group that no collapsed group holds is
one block; an expanded one that no collapsed group holds is a frame around its contents.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from .graph import Graph, Group


@dataclass(frozen=True)
class NestingProblem:
    """Why ``group`` cannot be kept with the groups before it: ``node`` is in two groups."""

    node: str
    group: Group
    message: str  # reads after the node's name: "conv1 is in two groups ..."

    def __str__(self) -> str:
        return f"{self.node} {self.message}"


def nesting_problem(groups: Iterable[Group]) -> NestingProblem | None:
    """The first group that neither holds nor stays apart from another (or names its nodes
    twice, or holds the same nodes as another), if any.

    Linear in the memberships: taking groups from the largest down, all nodes of a group
    must so far lie in one same group (or in none), which then holds it.
    """
    innermost: dict[str, Group] = {}
    for g in sorted(groups, key=lambda g: -len(set(g.nodes))):
        twice = next((n for i, n in enumerate(g.nodes) if n in g.nodes[:i]), None) if len(set(g.nodes)) != len(
            g.nodes) else None
        if twice is not None:
            return NestingProblem(twice, g, f"is named twice in group '{g.name}'")
        holders = {id(innermost[n]) if n in innermost else None for n in g.nodes}
        if len(holders) > 1:
            node = next(n for n in g.nodes if n in innermost)
            return NestingProblem(node, g, f"is in two groups ('{innermost[node].name}' and '{g.name}'), and "
                                           "neither holds the other: groups must nest")
        holder = innermost.get(g.nodes[0]) if g.nodes else None
        if holder is not None and len(set(holder.nodes)) == len(g.nodes):
            return NestingProblem(g.nodes[0], g, f"is in two groups ('{holder.name}' and '{g.name}') that hold "
                                                 "the same nodes")
        for n in g.nodes:
            innermost[n] = g
    return None


def parents(groups: Mapping[str, Group]) -> dict[str, str | None]:
    """Each group's parent: the smallest other group holding all of its nodes (None at the top)."""
    sets = {k: frozenset(g.nodes) for k, g in groups.items()}
    out: dict[str, str | None] = {}
    for k, mine in sets.items():
        holders = [o for o, theirs in sets.items() if o != k and mine < theirs]
        out[k] = min(holders, key=lambda o: len(sets[o])) if holders else None
    return out


def ancestors(groups: Mapping[str, Group], gid: str) -> list[str]:
    """``gid``'s parent, grandparent... up to a top-level group."""
    up = parents(groups)
    chain: list[str] = []
    at = up.get(gid)
    while at is not None:
        chain.append(at)
        at = up[at]
    return chain


def children(groups: Mapping[str, Group], gid: str | None) -> list[str]:
    """The groups directly inside ``gid`` (top-level groups for None), in the graph's order."""
    up = parents(groups)
    return [k for k in groups if up[k] == gid]


@dataclass(frozen=True)
class Visible:
    """What the canvas draws: blocks (collapsed groups shown), frames (expanded groups shown),
    and for every hidden node the block it is drawn in."""

    boxes: list[str]
    frames: list[str]
    owner: dict[str, str]


def visible(groups: Mapping[str, Group]) -> Visible:
    up = parents(groups)

    def hidden_by_collapsed_ancestor(k: str) -> bool:
        at = up[k]
        while at is not None:
            if groups[at].collapsed:
                return True
            at = up[at]
        return False

    shown = [k for k in groups if not hidden_by_collapsed_ancestor(k)]
    boxes = [k for k in shown if groups[k].collapsed]
    frames = [k for k in shown if not groups[k].collapsed]
    owner = {n: k for k in boxes for n in groups[k].nodes}
    return Visible(boxes, frames, owner)


@dataclass(frozen=True)
class Ports:
    """A group's ports: one input per outside source (every member port it feeds stands for
    it) and one output per member output that feeds the outside."""

    inputs: dict[tuple[str, str], list[tuple[str, str]]]  # (src, port) outside -> member (node, port)s
    outputs: list[tuple[str, str]]  # member (node, port)

    @property
    def count(self) -> int:
        return max(len(self.inputs), len(self.outputs), 1)


def external_ports(graph: Graph, nodes: Iterable[str]) -> Ports:
    inside = set(nodes)
    ins: dict[tuple[str, str], list[tuple[str, str]]] = {}
    outs: dict[tuple[str, str], None] = {}
    for e in graph.edges:
        if e.dst in inside and e.src not in inside:
            members = ins.setdefault((e.src, e.src_port), [])
            if (e.dst, e.dst_port) not in members:
                members.append((e.dst, e.dst_port))
        if e.src in inside and e.dst not in inside:
            outs[(e.src, e.src_port)] = None
    return Ports(ins, list(outs))


def prune(groups: Mapping[str, Group]) -> dict[str, Group]:
    """Drop groups left empty, and a group left with the same nodes as one before it (after a delete)."""
    out: dict[str, Group] = {}
    seen: set[frozenset[str]] = set()
    for k, g in groups.items():
        key = frozenset(g.nodes)
        if key and key not in seen:
            seen.add(key)
            out[k] = g
    return out


def groups_from_paths(paths: Mapping[str, str], kinds: Mapping[str, str] | None = None,
                      collapsed: bool = True) -> dict[str, Group]:
    """Groups for a module hierarchy: ``paths`` gives each node's module path (``layer1.0``
    for ``layer1.0.conv1``; "" at the top), ``kinds`` the class of each module path.

    Every module with two or more nodes becomes a group named by its path (``layer1``,
    ``layer1.0``); one holding exactly the nodes of its only sub-module is left out (the
    deeper, more specific one is kept). Groups come in reading order, each before those inside it.
    """
    kinds = kinds or {}
    members: dict[str, list[str]] = {}
    for node_id, path in paths.items():
        parts = path.split(".") if path else []
        for depth in range(1, len(parts) + 1):
            members.setdefault(".".join(parts[:depth]), []).append(node_id)
    by_set: dict[frozenset[str], str] = {}
    for path in sorted(members, key=lambda p: (-p.count("."), p)):  # deepest first: it wins a tie
        if len(members[path]) >= 2:
            by_set.setdefault(frozenset(members[path]), path)
    order = {n: i for i, n in enumerate(paths)}
    kept = sorted(by_set.values(), key=lambda p: (min(order[n] for n in members[p]), -len(members[p])))
    taken: set[str] = set()
    groups: dict[str, Group] = {}
    for path in kept:
        gid = _group_id(path, taken)
        groups[gid] = Group(gid, path, members[path], collapsed, kinds.get(path, ""))
    return groups


def set_collapsed_all(groups: Mapping[str, Group], collapsed: bool) -> dict[str, Group]:
    return {k: replace(g, collapsed=collapsed) for k, g in groups.items()}


def _group_id(path: str, taken: set[str]) -> str:
    base = "g_" + re.sub(r"\W", "_", path)
    gid, i = base, 2
    while gid in taken:
        gid, i = f"{base}_{i}", i + 1
    taken.add(gid)
    return gid


def path_of(groups: Mapping[str, Group], item: str) -> list[str]:
    """The groups ``item`` (a node or a group id) lies in, outermost first, ending with the
    group itself when ``item`` is one: where it sits, for breadcrumbs."""
    if item in groups:
        return [*reversed(ancestors(groups, item)), item]
    holding = [k for k, g in groups.items() if item in g.nodes]
    return sorted(holding, key=lambda k: -len(groups[k].nodes))
