"""The backward graph of a capture as a graph the design canvas's machinery can draw.

Each autograd node becomes a node of a :class:`~graph_editor.model.Graph` whose type is its
autograd name (``ConvolutionBackward0``; not a layer of the catalog, so it is never built or
validated), each gradient edge a wire from the node that sends a gradient to the node that receives
it, and each graph node's autograd nodes one collapsed group named after that node: a block per
graph node that opens to show what it holds. The design's own blocks (a ResNet stage, a residual
block) hold those blocks as they hold the layers, opened or closed as on the design canvas, so a big
network's backward graph reads through the same hierarchy as its design. Wires run from the loss towards the input, so the
backward pass reads left to right as it runs. Positions come from the canvas's own block layout
(:func:`~graph_editor.model.block_layout.nested_layout`), so a block opens in place without overlap.

Pure Python: the studio's Inspect workspace draws the result with the canvas's scene and items.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..model import Edge, Graph, Group
from ..model.block_layout import nested_layout
from .capture import LOSS

if TYPE_CHECKING:
    from .capture import AutogradCapture

__all__ = ["LOSS_KIND", "backward_graph", "node_ids"]

LOSS_KIND = "CrossEntropy"  # what the loss's block says it is


def node_ids(capture: AutogradCapture) -> list[str]:
    """The id of each autograd node (by index): ``_<index>``, with more underscores in front should a
    graph node id (a group id here) look like one, so node and block ids never meet."""
    prefix = "_"
    while any(o.startswith(prefix) and o[len(prefix):].isdigit() for o in capture.owners):
        prefix += "_"
    return [f"{prefix}{n.index}" for n in capture.nodes]


def backward_graph(capture: AutogradCapture, forward: Graph | None = None,
                   sizes: dict[str, tuple[float, float]] | None = None) -> Graph:
    """The backward graph of ``capture``: one collapsed group per graph node that owns autograd nodes
    (its id and name are the graph node's id; its kind the layer's name from ``forward`` when given),
    inside ``forward``'s groups (same ids, names and open/closed states), laid out block by block. A node's ``params`` keep its capture index (``autograd``) and owner; an
    ``AccumulateGrad``'s label is the parameter it feeds (without the owner's prefix).
    ``sizes`` overrides node boxes for the layout, as the canvas measures them."""
    ids = node_ids(capture)
    graph = Graph(metadata={"backward_of": capture.batch})
    for n, node_id in zip(capture.nodes, ids, strict=True):
        label = n.param.split(".", 1)[-1] if n.param else ""
        graph.add_node(n.name, node_id, {"autograd": n.index, "owner": n.owner}, label=label, check=False)
    seen: set[Edge] = set()
    for n in capture.nodes:
        for j in n.next:
            edge = Edge(ids[n.index], ids[j])
            if edge not in seen:  # x * x: the same node twice among next_functions, one wire
                seen.add(edge)
                graph.add_edge(edge, check=False)
    groups: dict[str, Group] = {}
    for owner, members in capture.by_owner().items():
        if members:  # a graph node with no autograd node (a view folded into another) has no block
            groups[owner] = Group(owner, owner, [ids[m.index] for m in members], True, _kind(owner, forward))
    for gid, group in (forward.groups.items() if forward is not None else ()):
        inner = [n for owner in group.nodes if owner in groups for n in groups[owner].nodes]
        if inner and gid not in groups:  # the design's blocks around the nodes' blocks, open or closed as there
            groups[gid] = Group(gid, group.name, inner, group.collapsed, group.kind)
    graph.set_groups(groups)
    for node_id, (x, y) in nested_layout(graph, sizes).items():
        graph.nodes[node_id].position = (x, y)
    return graph


def _kind(owner: str, forward: Graph | None) -> str:
    if forward is None:
        return ""
    node = forward.nodes.get(owner)
    if node is None:
        return LOSS_KIND if owner == LOSS else ""
    spec = node.spec
    return spec.display if spec is not None else node.type
