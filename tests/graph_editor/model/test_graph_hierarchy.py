"""Nested groups: the hierarchy rules, the file format (schema 3), commands, layouts that open in place."""

from __future__ import annotations

import json

import pytest

from graph_editor.model import (
    SCHEMA_VERSION,
    CommandError,
    GraphFileError,
    GroupNodes,
    RemoveNodes,
    UndoStack,
    graph_to_dict,
    load_graph,
    loads,
)
from graph_editor.model.block_layout import make_room, nested_layout
from graph_editor.model.geometry import box_size, node_size
from graph_editor.model.graph import Group
from graph_editor.model.hierarchy import (
    external_ports,
    groups_from_paths,
    nesting_problem,
    parents,
    visible,
)
from tests.graph_editor.graph_testing import TEMPLATES, lenet_graph


def grouped() -> tuple:
    g = lenet_graph()
    stack = UndoStack()
    outer = stack.push(GroupNodes(g, "features", ["conv1", "relu1", "pool1", "conv2", "relu2", "pool2"],
                                  kind="Sequential")).group.id
    inner = stack.push(GroupNodes(g, "block1", ["conv1", "relu1", "pool1"])).group.id
    return g, stack, outer, inner


def test_groups_nest_or_stay_apart():
    a = Group("a", "A", ["x", "y", "z"])
    assert nesting_problem([a, Group("b", "B", ["x", "y"]), Group("c", "C", ["q"])]) is None
    crossing = nesting_problem([a, Group("b", "B", ["z", "w"])])
    assert crossing.node == "z" and crossing.group.id == "b" and "must nest" in crossing.message
    assert "same nodes" in nesting_problem([a, Group("b", "B", ["z", "y", "x"])]).message
    assert "twice" in nesting_problem([Group("b", "B", ["x", "x"])]).message


def test_parents_and_what_shows():
    g, _, outer, inner = grouped()
    assert parents(g.groups) == {outer: None, inner: outer}
    shown = visible(g.groups)  # both collapsed: only the outer block shows, holding all six nodes
    assert shown.boxes == [outer] and shown.frames == [] and shown.owner["relu1"] == outer
    g.groups[outer].collapsed = False
    shown = visible(g.groups)
    assert shown.boxes == [inner] and shown.frames == [outer]
    assert shown.owner["relu1"] == inner and "conv2" not in shown.owner


def test_a_shared_input_is_one_port():
    g = lenet_graph()
    g.add_node("Conv2d", "side", {"out_channels": 6, "kernel_size": 5})
    g.connect("input", "side")
    ports = external_ports(g, ["conv1", "relu1", "side"])
    assert ports.inputs == {("input", "out"): [("conv1", "in"), ("side", "in")]}
    assert ports.outputs == [("relu1", "out")] and ports.count == 1


def test_module_paths_become_nested_groups():
    paths = {"conv1": "", "l1_0_c1": "layer1.0", "l1_0_c2": "layer1.0", "l1_1_c1": "layer1.1", "l1_1_c2": "layer1.1",
             "fc": "", "only": "head.wrap.inner", "only2": "head.wrap.inner"}
    groups = groups_from_paths(paths, {"layer1": "Sequential", "layer1.0": "BasicBlock"})
    by_name = {gr.name: gr for gr in groups.values()}
    # head.wrap and head hold exactly what head.wrap.inner holds: the deepest one is kept
    assert list(by_name) == ["layer1", "layer1.0", "layer1.1", "head.wrap.inner"]
    assert by_name["layer1"].nodes == ["l1_0_c1", "l1_0_c2", "l1_1_c1", "l1_1_c2"]
    assert by_name["layer1.0"].kind == "BasicBlock" and by_name["layer1"].kind == "Sequential"
    assert nesting_problem(groups.values()) is None


def test_nested_groups_round_trip_in_schema_3_and_version_2_files_migrate():
    g, *_ = grouped()
    data = graph_to_dict(g)
    assert data["schema_version"] == SCHEMA_VERSION == 3
    assert data["groups"][0]["kind"] == "Sequential" and "kind" not in data["groups"][1]
    again = loads(json.dumps(data))
    assert graph_to_dict(again) == data
    old = json.loads((TEMPLATES / "lenet5.graph.json").read_text())
    old.update(schema_version=2, groups=[{"id": "g", "name": "G", "nodes": ["conv1", "tanh1"], "collapsed": True}])
    migrated = loads(json.dumps(old))
    assert migrated.groups["g"].nodes == ["conv1", "tanh1"] and migrated.groups["g"].kind == ""


def test_a_file_with_crossing_groups_names_the_node_and_the_group():
    data = graph_to_dict(lenet_graph())
    data["groups"] = [{"id": "a", "name": "A", "nodes": ["conv1", "relu1"]},
                      {"id": "b", "name": "B", "nodes": ["relu1", "pool1"]}]
    with pytest.raises(GraphFileError) as info:
        loads(json.dumps(data))
    assert (info.value.node, info.value.field) == ("relu1", "groups[1].nodes") and "must nest" in str(info.value)
    data["groups"] = [{"id": "a", "name": "A", "nodes": ["conv1"], "kind": 3}]
    with pytest.raises(GraphFileError, match="text"):
        loads(json.dumps(data))


def test_grouping_across_a_group_is_refused_and_deleting_keeps_groups_distinct():
    g, stack, outer, inner = grouped()
    with pytest.raises(CommandError, match="must nest"):
        GroupNodes(g, "across", ["pool2", "flatten"])
    before = graph_to_dict(g)
    stack.push(RemoveNodes(g, ["conv2", "relu2", "pool2"]))  # features now holds what block1 holds
    assert list(g.groups) == [outer] and g.groups[outer].nodes == ["conv1", "relu1", "pool1"]
    stack.undo()
    assert graph_to_dict(g) == before


def _overlaps(rects):
    return [(a[0], b[0]) for i, a in enumerate(rects) for b in rects[i + 1:]
            if a[1] < b[3] and b[1] < a[3] and a[2] < b[4] and b[2] < a[4]]


def _shown_rects(graph):
    shown = visible(graph.groups)
    rects = []
    for k in shown.boxes:
        ps = [graph.nodes[n].position for n in graph.groups[k].nodes]
        (w, h), x, y = box_size(external_ports(graph, graph.groups[k].nodes).count), min(
            p[0] for p in ps), min(p[1] for p in ps)
        rects.append((k, x, y, x + w, y + h))
    for n, node in graph.nodes.items():
        if n not in shown.owner:
            (w, h), (x, y) = node_size(node), node.position
            rects.append((n, x, y, x + w, y + h))
    return rects


@pytest.mark.parametrize("opens", [["layer3"], ["layer1", "layer1.0"], ["stem", "layer2", "head"]])
def test_opening_blocks_in_place_overlaps_nothing_and_closing_restores_every_position(opens):
    graph = load_graph(TEMPLATES / "resnet50.graph.json")
    start = {n: node.position for n, node in graph.nodes.items()}
    ids = {gr.name: k for k, gr in graph.groups.items()}
    for name in opens:
        for n, p in make_room(graph, ids[name], expand=True).items():
            graph.nodes[n].position = p
        graph.groups[ids[name]].collapsed = False
        assert not _overlaps(_shown_rects(graph)), name
    for name in reversed(opens):
        for n, p in make_room(graph, ids[name], expand=False).items():
            graph.nodes[n].position = p
        graph.groups[ids[name]].collapsed = True
    assert {n: node.position for n, node in graph.nodes.items()} == start


def test_nested_layout_of_an_open_group_leaves_room_for_its_frame():
    graph = load_graph(TEMPLATES / "resnet18.graph.json")
    for gr in graph.groups.values():
        gr.collapsed = gr.name != "layer2"
    for n, p in nested_layout(graph).items():
        graph.nodes[n].position = p
    assert not _overlaps(_shown_rects(graph))
    assert len({round(y) for _, _, y, _, _ in _shown_rects(graph)}) > 1  # two dimensions


def test_a_closed_block_holding_an_open_one_sits_in_its_slot_and_opens_cleanly():
    graph = load_graph(TEMPLATES / "resnet18.graph.json")
    ids = {gr.name: k for k, gr in graph.groups.items()}
    graph.groups[ids["layer2.0"]].collapsed = False  # open inside a closed stage
    for n, p in nested_layout(graph).items():
        graph.nodes[n].position = p
    plain = nested_layout(load_graph(TEMPLATES / "resnet18.graph.json"))
    members = graph.groups[ids["layer2"]].nodes

    def corner(pos):
        return min(pos[n][0] for n in members), min(pos[n][1] for n in members)

    assert corner({n: graph.nodes[n].position for n in members}) == corner(plain)  # where the closed stage goes
    assert not _overlaps(_shown_rects(graph))
    for n, p in make_room(graph, ids["layer2"], expand=True).items():
        graph.nodes[n].position = p
    graph.groups[ids["layer2"]].collapsed = False
    assert not _overlaps(_shown_rects(graph))
