"""Every command's undo/redo, macros as one step, the clean state, and refused edits."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graph_editor.model import (
    AddNode,
    CommandError,
    Connect,
    Disconnect,
    Edge,
    Graph,
    GroupNodes,
    InputSpec,
    MoveNodes,
    RemoveNodes,
    RenameLabel,
    SetGroupCollapsed,
    SetParam,
    SetSpec,
    UndoStack,
    Ungroup,
    graph_to_dict,
)
from tests.graph_editor.graph_testing import lenet_graph


def snapshot(g: Graph) -> dict:
    return graph_to_dict(g)


COMMANDS = {
    "add": lambda g: AddNode(g, "Conv2d", "extra", {"out_channels": 8}, (10, 20)),
    "add auto id": lambda g: AddNode(g, "ReLU"),
    "remove one": lambda g: RemoveNodes(g, ["relu1"]),
    "remove several": lambda g: RemoveNodes(g, ["conv2", "fc1", "relu3"]),
    "connect (replaces the wire)": lambda g: Connect(g, Edge("input", "conv2")),
    "disconnect": lambda g: Disconnect(g, Edge("conv1", "relu1")),
    "set param": lambda g: SetParam(g, "conv1", "out_channels", 12),
    "set pair param": lambda g: SetParam(g, "pool1", "kernel_size", 3),
    "rename": lambda g: RenameLabel(g, "conv1", "stem"),
    "move": lambda g: MoveNodes(g, {"conv1": (5, 6), "relu1": (7, 8)}),
    "group": lambda g: GroupNodes(g, "features", ["conv1", "relu1", "pool1"]),
    "spec": lambda g: SetSpec(g, InputSpec((3, 32, 32), "float32"), 100),
}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_undo_restores_and_redo_reapplies(name):
    g = lenet_graph()
    before = snapshot(g)
    stack = UndoStack()
    stack.push(COMMANDS[name](g))
    after = snapshot(g)
    assert after != before
    stack.undo()
    assert snapshot(g) == before
    stack.redo()
    assert snapshot(g) == after
    stack.undo()
    assert snapshot(g) == before


def test_group_commands_undo():
    g = lenet_graph()
    stack = UndoStack()
    group = stack.push(GroupNodes(g, "features", ["conv1", "relu1"]))
    gid = group.group.id
    grouped = snapshot(g)
    stack.push(SetGroupCollapsed(g, gid, False))
    assert g.groups[gid].collapsed is False
    stack.push(Ungroup(g, gid))
    assert not g.groups
    stack.undo()
    stack.undo()
    assert snapshot(g) == grouped


def test_undo_of_delete_restores_groups_even_after_regrouping():
    g = lenet_graph()
    stack = UndoStack()
    stack.push(GroupNodes(g, "features", ["conv1", "relu1"]))
    grouped = snapshot(g)
    stack.push(RemoveNodes(g, ["relu1"]))
    assert list(g.groups.values())[0].nodes == ["conv1"]
    stack.undo()
    stack.undo()
    stack.redo()  # the group comes back whole, not as the delete left it
    assert snapshot(g) == grouped


def test_deleting_every_member_drops_the_group():
    g = lenet_graph()
    stack = UndoStack()
    stack.push(GroupNodes(g, "pair", ["conv1", "relu1"]))
    stack.push(RemoveNodes(g, ["conv1", "relu1"]))
    assert not g.groups
    stack.undo()
    assert list(g.groups.values())[0].nodes == ["conv1", "relu1"]


def test_macro_is_one_undo_step():
    g = lenet_graph()
    before = snapshot(g)
    stack = UndoStack()
    stack.begin_macro("Insert BatchNorm")
    add = stack.push(AddNode(g, "BatchNorm2d", "bn1"))
    stack.push(Connect(g, Edge("conv1", add.node_id)))
    stack.push(Connect(g, Edge(add.node_id, "relu1")))
    stack.end_macro()
    after = snapshot(g)
    assert stack.undo_text() == "Insert BatchNorm"
    stack.undo()
    assert snapshot(g) == before
    assert not stack.can_undo()
    stack.redo()
    assert snapshot(g) == after


def test_nested_and_empty_macros():
    g = lenet_graph()
    stack = UndoStack()
    stack.begin_macro("outer")
    stack.push(SetParam(g, "fc1", "out_features", 64))
    stack.begin_macro("inner")
    stack.push(SetParam(g, "fc2", "in_features", 64))
    stack.end_macro()
    stack.end_macro()
    stack.begin_macro("nothing")
    stack.end_macro()  # an empty macro leaves no step
    assert stack.undo_text() == "outer"
    stack.undo()
    assert g.nodes["fc1"].params["out_features"] == 120 and g.nodes["fc2"].params["in_features"] is None
    with pytest.raises(CommandError):
        stack.end_macro()


def test_clean_state():
    g = lenet_graph()
    stack = UndoStack()
    assert stack.is_clean()
    stack.push(SetParam(g, "conv1", "out_channels", 8))
    assert not stack.is_clean()
    stack.set_clean()  # saved here
    stack.push(SetParam(g, "conv1", "out_channels", 9))
    stack.undo()
    assert stack.is_clean()
    stack.undo()
    assert not stack.is_clean()
    # A new edit from before the save point makes the saved state unreachable.
    stack.begin_macro("m")
    stack.push(SetParam(g, "conv1", "out_channels", 7))
    stack.end_macro()
    stack.push(SetParam(g, "conv1", "out_channels", 6))
    assert not stack.is_clean()


REFUSED = {
    "unknown type": lambda g: AddNode(g, "Conv4d"),
    "duplicate id": lambda g: AddNode(g, "ReLU", "conv1"),
    "bad id": lambda g: AddNode(g, "ReLU", "1st relu"),
    "bad param": lambda g: AddNode(g, "Conv2d", params={"out_channels": 0}),
    "unknown param": lambda g: SetParam(g, "conv1", "colour", 1),
    "param out of range": lambda g: SetParam(g, "conv1", "stride", 0),
    "param wrong type": lambda g: SetParam(g, "relu1", "inplace", True),
    "cycle": lambda g: Connect(g, Edge("fc3", "conv1")),
    "self loop": lambda g: Connect(g, Edge("conv1", "conv1")),
    "bad port": lambda g: Connect(g, Edge("conv1", "relu1", dst_port="gate")),
    "already connected": lambda g: Connect(g, Edge("conv1", "relu1")),
    "missing node": lambda g: RemoveNodes(g, ["ghost"]),
    "nothing to delete": lambda g: RemoveNodes(g, []),
    "missing edge": lambda g: Disconnect(g, Edge("conv1", "fc3")),
    "empty group name": lambda g: GroupNodes(g, " ", ["conv1"]),
    "missing group": lambda g: Ungroup(g, "nope"),
    "bad spec": lambda g: SetSpec(g, InputSpec((0, 3)), 10),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_edits_leave_the_graph_unchanged(name):
    g = lenet_graph()
    before = snapshot(g)
    with pytest.raises(CommandError) as info:
        REFUSED[name](g)
    assert info.value.message
    assert snapshot(g) == before


def test_events_follow_the_edits():
    g = lenet_graph()
    seen: list[tuple] = []
    g.events.node_added.connect(lambda i: seen.append(("added", i)))
    g.events.node_removed.connect(lambda i: seen.append(("removed", i)))
    g.events.params_changed.connect(lambda i, name: seen.append(("param", i, name)))
    stack = UndoStack()
    stack.push(AddNode(g, "ReLU", "r"))
    stack.push(SetParam(g, "conv1", "out_channels", 4))
    stack.undo()
    stack.undo()
    assert seen == [("added", "r"), ("param", "conv1", "out_channels"), ("param", "conv1", "out_channels"),
                    ("removed", "r")]


# A random session of edits: undoing all of it gives the start back, redoing all gives the end.
EDITS = st.lists(st.tuples(st.sampled_from(["add", "remove", "connect", "disconnect", "param", "move", "group",
                                            "ungroup", "label"]), st.integers(0, 50), st.integers(0, 50)),
                 min_size=1, max_size=12)


def random_command(g: Graph, kind: str, a: int, b: int):
    ids = sorted(g.nodes)
    pick = (lambda k: ids[k % len(ids)]) if ids else None
    if kind == "add" or not ids:
        return AddNode(g, ["ReLU", "Linear", "Conv2d", "Add"][a % 4], position=(a, b))
    if kind == "remove":
        return RemoveNodes(g, {pick(a), pick(b)})
    if kind == "connect":
        return Connect(g, Edge(pick(a), pick(b)))
    if kind == "disconnect" and g.edges:
        return Disconnect(g, g.edges[a % len(g.edges)])
    if kind == "param" and g.nodes[pick(a)].type == "Linear":
        return SetParam(g, pick(a), "out_features", b + 1)
    if kind == "group":
        return GroupNodes(g, f"g{a}", [pick(a), pick(b)])
    if kind == "ungroup" and g.groups:
        return Ungroup(g, sorted(g.groups)[a % len(g.groups)])
    if kind == "label":
        return RenameLabel(g, pick(a), f"label {b}")
    return MoveNodes(g, {pick(a): (b, a)})


@settings(max_examples=60, deadline=None)
@given(EDITS)
def test_any_session_undoes_and_redoes_exactly(edits):
    g = lenet_graph()
    start = snapshot(g)
    stack = UndoStack()
    for kind, a, b in edits:
        try:
            command = random_command(g, kind, a, b)
        except CommandError:
            continue  # refused edits never reach the stack
        stack.push(command)
    end = snapshot(g)
    while stack.can_undo():
        stack.undo()
    assert snapshot(g) == start
    while stack.can_redo():
        stack.redo()
    assert snapshot(g) == end
