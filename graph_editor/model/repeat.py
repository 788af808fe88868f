"""A block repeated N times: a group whose ``repeat`` is above 1 stands for N copies of itself in a chain.

The graph keeps one copy (what the canvas shows, tagged ``×N``); :func:`unrolled` writes out the others
for building, analysis and training: copy ``k`` (2..N) of node ``conv`` is ``conv_r{k}``, wired as the
original is inside, its input taken from the previous copy's output, and what followed the block now
follows the last copy. A block can repeat when everything entering it comes from one output port
outside and everything leaving it from one output port inside (a residual block, a ViT encoder block);
each copy takes what the one before gives out (layers whose input size is inferred follow along), which
shape inference checks on the unrolled graph.

A sweep searches the count as ``block.<group id>.repeat=1..4`` (:mod:`trainer.sweep.space`).
"""

from __future__ import annotations

from typing import Any

from .commands import Command
from .errors import CommandError, GraphFileError
from .graph import Edge, Graph, Group
from .validate import validate

MAX_REPEAT = 32
SUFFIX = "_r{k}"


def check_repeat(value: Any, where: str) -> int:
    """A repeat count as read from a file or typed: an integer 1..MAX_REPEAT, else ValueError naming ``where``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_REPEAT:
        raise ValueError(f"{where}: a block's repeat count is a whole number from 1 to {MAX_REPEAT}, not {value!r}")
    return value


def group_repeat(raw: dict[str, Any], name: str, where: str) -> int:
    """A group's ``repeat`` as a graph file gives it (1 when absent); GraphFileError names the field."""
    try:
        return check_repeat(raw.get("repeat", 1), f"group '{name}'")
    except ValueError as exc:
        raise GraphFileError(str(exc), field=f"{where}.repeat") from None


def ports(graph: Graph, group: Group) -> tuple[tuple[str, str], tuple[str, str]] | str:
    """The (node, port) feeding the block and the (node, port) it gives out, or why it cannot repeat."""
    inside = set(group.nodes)
    entering = {(e.src, e.src_port) for e in graph.edges if e.dst in inside and e.src not in inside}
    leaving = {(e.src, e.src_port) for e in graph.edges if e.src in inside and e.dst not in inside}
    if any(graph.nodes[n].type in ("Input", "Output") for n in inside):
        return f"block '{group.name}' holds the graph's Input or Output"
    if len(entering) != 1 or len(leaving) != 1:
        return (f"block '{group.name}' cannot repeat: it takes {len(entering)} input(s) and gives {len(leaving)} "
                "output(s) (a repeated block takes one tensor and gives one of the same shape)")
    return next(iter(entering)), next(iter(leaving))


def repeat_problem(graph: Graph, group_id: str, count: int) -> str | None:
    """Why ``group_id`` cannot repeat ``count`` times (None when it can)."""
    try:
        check_repeat(count, f"block '{group_id}'")
    except ValueError as exc:
        return str(exc)
    if count == 1:
        return None
    found = ports(graph, graph.groups[group_id])
    if isinstance(found, str):
        return found
    taken = [f"{n}{SUFFIX.format(k=k)}" for n in graph.groups[group_id].nodes for k in range(2, count + 1)]
    clash = next((t for t in taken if t in graph.nodes), None)
    return f"block '{group_id}': its copies would be named like '{clash}', which is taken" if clash else None


def shape_problem(graph: Graph, group_id: str, count: int) -> str | None:
    """Why the graph would not work with the block repeated ``count`` times (a copy cannot take the shape
    the one before gives out), when the graph works as it is; None otherwise."""
    if count == 1 or not validate(graph).ok:      # a graph broken already says so itself
        return None
    trial = graph.copy()
    trial.groups[group_id].repeat = count
    errors = [p for p in validate(unrolled(trial)).problems if p.severity == "error"]
    if not errors:
        return None
    node = errors[0].node or ""
    return (f"block '{graph.groups[group_id].name}' cannot repeat {count} times: its copy fails at "
            f"{node}: {errors[0].message} (each copy takes the previous copy's output)")


def unrolled(graph: Graph) -> Graph:
    """``graph`` itself when no block repeats, else a copy with every repeated block written out."""
    repeated = [g for g in graph.groups.values() if g.repeat > 1]
    if not repeated:
        return graph
    out = graph.copy()
    for group in repeated:
        problem = repeat_problem(out, group.id, group.repeat)
        if problem is not None:
            raise CommandError(problem, field="repeat")
        _unroll(out, out.groups[group.id])
    return out


def _unroll(graph: Graph, group: Group) -> None:
    found = ports(graph, group)
    assert not isinstance(found, str)
    _, (exit_node, exit_port) = found
    inside = set(group.nodes)
    after = [e for e in graph.edges if e.src in inside and e.dst not in inside]
    inner = [e for e in graph.edges if e.src in inside and e.dst in inside]
    entering = [e for e in graph.edges if e.dst in inside and e.src not in inside]
    graph.edges = [e for e in graph.edges if e not in after]
    last = (exit_node, exit_port)
    for k in range(2, group.repeat + 1):
        name = {n: f"{n}{SUFFIX.format(k=k)}" for n in group.nodes}
        for n in group.nodes:
            node = graph.nodes[n]
            graph.add_node(node.type, name[n], dict(node.params), node.position, check=False)
        graph.edges += [Edge(name[e.src], name[e.dst], e.src_port, e.dst_port) for e in inner]
        graph.edges += [Edge(last[0], name[e.dst], last[1], e.dst_port) for e in entering]
        graph.groups[f"{group.id}{SUFFIX.format(k=k)}"] = Group(f"{group.id}{SUFFIX.format(k=k)}",
                                                              f"{group.name} ({k})", list(name.values()), True,
                                                              group.kind)
        last = (name[exit_node], exit_port)
    graph.edges += [Edge(last[0], e.dst, last[1], e.dst_port) for e in after]
    group.repeat = 1


class SetRepeat(Command):
    """Repeat block ``group_id`` ``count`` times (1: once, as drawn)."""

    def __init__(self, graph: Graph, group_id: str, count: int) -> None:
        if group_id not in graph.groups:
            raise CommandError(f"there is no block '{group_id}'")
        problem = repeat_problem(graph, group_id, count) or shape_problem(graph, group_id, count)
        if problem is not None:
            raise CommandError(problem, field="repeat")
        self.graph, self.group_id = graph, group_id
        self.old, self.new = graph.groups[group_id].repeat, count
        self.text = f"Repeat {graph.groups[group_id].name} ×{count}"

    def redo(self) -> None:
        self._set(self.new)

    def undo(self) -> None:
        self._set(self.old)

    def _set(self, count: int) -> None:
        self.graph.groups[self.group_id].repeat = count
        self.graph.events.changed.emit()     # not groups_changed: the blocks drawn stay as they are (and selected)


__all__ = ["MAX_REPEAT", "SetRepeat", "check_repeat", "group_repeat", "ports", "repeat_problem", "shape_problem",
           "unrolled"]
