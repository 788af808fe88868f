"""Sweep variables: a node's parameter marked, in the Inspector, as searched by a sweep.

They live in the graph file's ``metadata["sweep"]`` as ``{"conv1.out_channels": "16..64:step16"}``
and become tokens of a sweep's space (``node.conv1.out_channels=16..64:step16``, the syntax of
``trainer.sweep.space``, which checks every value a trial can draw against the layer's own rules).
A block's repeat count is one too: ``{"layer1.repeat": "1..4"}`` (a group id) becomes
``block.layer1.repeat=1..4``.
Here only the form of a range is checked: ``LOW..HIGH[:log|:stepN]`` or ``A|B|C``.
"""

from __future__ import annotations

import re

from .commands import Command
from .errors import CommandError
from .graph import Graph

KEY = "sweep"
REPEAT = "repeat"       # a block's sweep variable: how many times it repeats
NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
RANGE_RE = re.compile(rf"^{NUMBER}\.\.{NUMBER}(?::(?:log|step{NUMBER}))?$")
CHOICE_RE = re.compile(r"^[^|,=\s]+(?:\|[^|,=\s]+)+$")
SWEEPABLE = ("out_channels", "out_features", "p", "num_heads", "hidden_features", "embed_dim", "mlp_ratio",
             "negative_slope")   # a layer's width, its dropout, its heads: what a sweep of the design searches


def variables(graph: Graph) -> dict[str, str]:
    """``{"node.param": range}`` of the graph's sweep variables whose node and parameter still exist."""
    raw = graph.metadata.get(KEY)
    if not isinstance(raw, dict):
        return {}
    out = {}
    for name, rng in raw.items():
        owner, _, param = str(name).rpartition(".")
        node = owner in graph.nodes and param in graph.nodes[owner].params
        if isinstance(rng, str) and (node or owner in graph.groups and param == REPEAT):
            out[str(name)] = rng
    return out


def sweepable(graph: Graph, node_id: str) -> list[str]:
    """The parameters of ``node_id`` the Inspector offers to sweep (numbers among :data:`SWEEPABLE`)."""
    spec = graph.node(node_id).spec
    return [p.name for p in spec.params if p.name in SWEEPABLE and p.kind in ("int", "float")] if spec else []


def space_tokens(graph: Graph) -> list[str]:
    """The sweep variables as tokens of a sweep's space (``node.conv1.out_channels=16..64:step16``)."""
    return [f"{'block' if name.rpartition('.')[0] in graph.groups else 'node'}.{name}={rng}"
            for name, rng in variables(graph).items()]


def range_problem(text: str) -> str | None:
    """Why ``text`` is not a range a sweep reads (None when it is)."""
    t = text.strip()
    if RANGE_RE.match(t) or CHOICE_RE.match(t):
        return None
    return f"'{t}' is not a range: write LOW..HIGH (optionally :log or :stepN) or choices A|B|C"


class SetSweepVariable(Command):
    """Mark ``node.param`` as swept over ``rng`` (None or "" unmarks it)."""

    def __init__(self, graph: Graph, node_id: str, param: str, rng: str | None) -> None:
        if node_id in graph.groups and node_id not in graph.nodes:     # a block: its repeat count only
            if param != REPEAT:
                raise CommandError(f"block {node_id} sweeps only its '{REPEAT}' count, not '{param}'", field=param)
        elif param not in graph.node(node_id).params:
            raise CommandError(f"{node_id} has no parameter '{param}'", node=node_id, field=param)
        rng = (rng or "").strip()
        if rng and (why := range_problem(rng)) is not None:
            raise CommandError(why, node=node_id, field=param)
        current = graph.metadata.get(KEY)
        self.old = dict(current) if isinstance(current, dict) else None
        new = dict(self.old or {})
        new.pop(f"{node_id}.{param}", None)
        if rng:
            new[f"{node_id}.{param}"] = rng
        self.new = new or None
        self.graph = graph
        self.text = f"Sweep {node_id}.{param} over {rng}" if rng else f"Stop sweeping {node_id}.{param}"

    def redo(self) -> None:
        self.graph.set_metadata(KEY, self.new)

    def undo(self) -> None:
        self.graph.set_metadata(KEY, self.old)


__all__ = ["KEY", "SWEEPABLE", "SetSweepVariable", "range_problem", "space_tokens", "sweepable", "variables"]
