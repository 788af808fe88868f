"""backward_graph: a capture as a graph the canvas draws, one block per graph node inside the design's blocks."""

from __future__ import annotations

from graph_editor.autograd.canvas_graph import LOSS_KIND, backward_graph, node_ids
from graph_editor.autograd.capture import LOSS, capture_autograd
from graph_editor.model.geometry import box_size
from graph_editor.model.hierarchy import external_ports, nesting_problem, visible
from graph_editor.model.serialize import load_graph
from tests.graph_editor.graph_testing import TEMPLATES


def _boxes(graph) -> dict[str, tuple[float, float, float, float]]:
    """The rectangle of each closed block on screen (its members' corner, its drawn size)."""
    shown = visible(graph.groups)
    out = {}
    for gid in shown.boxes:
        members = [graph.nodes[n].position for n in graph.groups[gid].nodes]
        w, h = box_size(external_ports(graph, graph.groups[gid].nodes).count)
        out[gid] = (min(x for x, _ in members), min(y for _, y in members), w, h)
    return out


def _overlap(a, b) -> bool:
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


def test_digits_cnn_one_block_per_graph_node_wires_from_the_loss():
    forward = load_graph(TEMPLATES / "digits_cnn.graph.json")
    capture = capture_autograd(forward, 8)
    graph = backward_graph(capture, forward)
    ids = node_ids(capture)
    # every autograd node once, its name as the type, its owner's block holding it
    assert [graph.nodes[i].type for i in ids] == [n.name for n in capture.nodes]
    owners = {o for o, nodes in capture.by_owner().items() if nodes}
    assert set(graph.groups) == owners and LOSS in owners
    for n in capture.nodes:
        assert ids[n.index] in graph.groups[n.owner].nodes
    assert graph.groups["conv1"].kind == "Conv2d" and graph.groups[LOSS].kind == LOSS_KIND
    assert all(g.collapsed for g in graph.groups.values())
    # wires go the way gradients flow: from the node nearer the loss to the node it hands a gradient to
    assert {(e.src, e.dst) for e in graph.edges} == {(ids[a], ids[b]) for a, b in capture.edges}
    accumulate = [graph.nodes[ids[n.index]] for n in capture.nodes if n.param == "conv1.weight"]
    assert [a.label for a in accumulate] == ["weight"]
    # laid out left to right from the loss, no two blocks overlapping
    boxes = _boxes(graph)
    assert boxes[LOSS][0] == min(b[0] for b in boxes.values()) and boxes[LOSS][1] == min(b[1] for b in boxes.values())
    assert not any(_overlap(a, b) for i, a in enumerate(boxes.values()) for b in list(boxes.values())[i + 1:])


def test_resnet_blocks_sit_inside_the_designs_blocks_open_or_closed_as_there():
    forward = load_graph(TEMPLATES / "resnet18_cifar.graph.json")
    capture = capture_autograd(forward, 2)
    graph = backward_graph(capture, forward)
    assert nesting_problem(graph.groups.values()) is None
    for gid, group in forward.groups.items():
        owners = {graph.nodes[n].params["owner"] for n in graph.groups[gid].nodes}
        assert owners == {n for n in group.nodes if n in capture.owners and n in graph.groups}
        assert graph.groups[gid].collapsed == group.collapsed and graph.groups[gid].name == group.name
    # what shows at first: the design's closed stages, each a block, none overlapping
    boxes = _boxes(graph)
    assert set(boxes) == set(visible(forward.groups).boxes) | {LOSS}
    assert not any(_overlap(a, b) for i, a in enumerate(boxes.values()) for b in list(boxes.values())[i + 1:])


def test_node_ids_never_meet_a_graph_nodes_id():
    forward = load_graph(TEMPLATES / "mlp.graph.json")
    capture = capture_autograd(forward, 2)
    assert node_ids(capture)[0] == "_0"
    capture.owners.insert(0, "_7")            # a graph node named like an autograd node's id
    assert node_ids(capture)[0] == "__0"
