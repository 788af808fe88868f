"""Activation checkpointing over graph node ranges: keep a segment's inputs, recompute the rest in backward.

A run spec names segments as a group id (``"g_layer1"``: the nodes of that block) or a range of
node ids in graph order (``"layer2_0_conv1..layer2_1_relu2"``). :func:`apply_checkpointing` rewrites
the built ``fx.GraphModule`` so that each segment runs under
``torch.utils.checkpoint.checkpoint(use_reentrant=False)``: what the segment's layers would save for
backward is not kept; backward runs the segment's forward again (about one more forward of it).
The layers stay the model's own children under their node ids, so state dicts, checkpoints and
exports are unchanged.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

from torch import fx, nn
from torch.utils.checkpoint import checkpoint

from graph_editor.model import Graph

RANGE = ".."


class SegmentError(ValueError):
    """A segment that cannot be checkpointed; the message names the entry."""


def resolve_segments(graph: Graph, order: Sequence[str], entries: Sequence[str],
                     where: str = "memory.checkpoint") -> list[list[str]]:
    """Each entry as the node ids it covers, in graph order; raises SegmentError naming the entry."""
    position = {n: i for i, n in enumerate(order)}
    segments: list[list[str]] = []
    taken: dict[str, int] = {}
    for k, entry in enumerate(entries):
        here = f"{where}[{k}]"
        if not isinstance(entry, str) or not entry.strip():
            raise SegmentError(f"{here}: expected a group id or 'first..last' node ids, got {entry!r}")
        if RANGE in entry:
            first, _, last = (s.strip() for s in entry.partition(RANGE))
            for end in (first, last):
                if end not in position:
                    raise SegmentError(f"{here}: no layer node '{end}' in the graph")
            if position[first] > position[last]:
                raise SegmentError(f"{here}: '{first}' comes after '{last}' in the graph")
            ids = list(order[position[first]:position[last] + 1])
        elif entry in graph.groups:
            ids = sorted((n for n in graph.groups[entry].nodes if n in position), key=position.__getitem__)
            if not ids:
                raise SegmentError(f"{here}: group '{entry}' holds no layer")
            ids = list(order[position[ids[0]]:position[ids[-1]] + 1])
        else:
            raise SegmentError(f"{here}: '{entry}' is neither a group id nor a 'first..last' range "
                                  f"(groups: {', '.join(graph.groups) or 'none'})")
        for n in ids:
            if n in taken:
                raise SegmentError(f"{here}: node '{n}' is already in {where}[{taken[n]}]")
            taken[n] = k
        segments.append(ids)
    return segments


class Checkpointed(nn.Module):
    """Runs a segment's sub-graph under ``checkpoint``. The sub-graph is held outside the module
    tree: its layers are registered once, as the model's own children."""

    def __init__(self, inner: fx.GraphModule, nodes: list[str]) -> None:
        super().__init__()
        self._inner = [inner]
        self.nodes = nodes

    def forward(self, *args: Any) -> Any:
        return checkpoint(self._inner[0], *args, use_reentrant=False)


def apply_checkpointing(gm: fx.GraphModule, segments: Sequence[Sequence[str]]) -> fx.GraphModule:
    """A GraphModule like ``gm`` whose ``segments`` (lists of call_module node ids, in graph order)
    each run under activation checkpointing; the same layer objects, the same parameters."""
    if not segments:
        return gm
    modules = dict(gm.named_children())
    start = {seg[0]: i for i, seg in enumerate(segments)}
    inside = {n: i for i, seg in enumerate(segments) for n in seg}
    new = fx.Graph()
    env: dict[fx.Node, fx.Node] = {}
    nodes = list(gm.graph.nodes)
    users_after = _users(nodes)
    done: set[int] = set()
    for node in nodes:
        seg_i = inside.get(node.target) if node.op == "call_module" else None
        if seg_i is None:
            env[node] = new.node_copy(node, lambda n: env[n])
            continue
        if seg_i in done:
            continue
        if node.target not in start:
            raise SegmentError(f"segment {seg_i}: its nodes are not in graph order")
        seg_nodes = [n for n in nodes if n.op == "call_module" and inside.get(n.target) == seg_i]
        inner, inputs, outputs = _subgraph(gm, seg_nodes, users_after)
        name = f"checkpoint_{seg_i}"
        gm_seg = fx.GraphModule({n.target: modules[n.target] for n in seg_nodes}, inner)
        modules[name] = Checkpointed(gm_seg, [n.target for n in seg_nodes])
        call = new.call_module(name, tuple(env[i] for i in inputs))
        if len(outputs) == 1:
            env[outputs[0]] = call
        else:
            for j, seg_out in enumerate(outputs):
                env[seg_out] = new.call_function(operator.getitem, (call, j))
        done.add(seg_i)
    root = nn.Module()
    for name, module in modules.items():
        root.add_module(name, module)
    out = fx.GraphModule(root, new, class_name=type(gm).__name__)
    # Every layer stays a child, in the original order (parameter order is the optimizer's state
    # order), the segments after them.
    out._modules = {name: modules[name] for name in [*gm._modules, *(n for n in modules if n not in gm._modules)]}
    out.meta.update(gm.meta)
    out.meta["checkpoint"] = [list(s) for s in segments]
    return out


def _users(nodes: list[fx.Node]) -> dict[fx.Node, list[fx.Node]]:
    return {n: list(n.users) for n in nodes}


def _subgraph(gm: fx.GraphModule, seg_nodes: list[fx.Node], users: dict[fx.Node, list[fx.Node]],
              ) -> tuple[fx.Graph, list[fx.Node], list[fx.Node]]:
    """The segment as a graph of its own: placeholders for what it reads from outside, an output of
    what is read after it."""
    members = set(seg_nodes)
    g = fx.Graph()
    env: dict[fx.Node, fx.Node] = {}
    inputs: list[fx.Node] = []

    def arg(n: fx.Node) -> fx.Node:
        if n not in env:
            inputs.append(n)
            env[n] = g.placeholder(f"in_{len(inputs)}")
        return env[n]

    for n in seg_nodes:
        env[n] = g.node_copy(n, arg)
    outputs = [n for n in seg_nodes if any(u not in members for u in users[n])]
    if not outputs:
        raise SegmentError(f"segment ending at '{seg_nodes[-1].target}': nothing after it reads its result")
    g.output(env[outputs[0]] if len(outputs) == 1 else tuple(env[o] for o in outputs))
    return g, inputs, outputs


def checkpointed_module(gm: fx.GraphModule, graph: Graph, entries: Sequence[str],
                        where: str = "memory.checkpoint") -> fx.GraphModule:
    """``gm`` with the spec's checkpoint entries (group ids or 'first..last' ranges) applied."""
    if not entries:
        return gm
    order = [n.target for n in gm.graph.nodes if n.op == "call_module"]
    return apply_checkpointing(gm, resolve_segments(graph, order, entries, where))
