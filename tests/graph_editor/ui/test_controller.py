"""Every intent of the EditorController, and undo/redo of each through the QUndoStack."""

from __future__ import annotations

import json

import pytest
from PySide6.QtGui import QGuiApplication

from graph_editor.model import Edge, InputSpec, dumps
from graph_editor.ui.controller import EditorController
from graph_editor.ui.mime import GRAPH_MIME


def state(graph) -> str:
    """The graph file with nodes in id order (undo may put a node back at the end)."""
    data = json.loads(dumps(graph))
    data["nodes"].sort(key=lambda n: n["id"])
    return json.dumps(data)


def roundtrip(editor: EditorController, before: str) -> None:
    """Undo restores the graph exactly; redo brings the edit back."""
    after = state(editor.graph)
    assert after != before
    editor.undo_stack.undo()
    assert state(editor.graph) == before
    editor.undo_stack.redo()
    assert state(editor.graph) == after


def test_add_node_is_one_undo_step(editor, qtbot):
    before = state(editor.graph)
    with qtbot.waitSignal(editor.node_added) as sig:
        assert editor.add_node("Conv2d", (10, 20)) is None
    new = sig.args[0]
    assert new == editor.last_added and editor.graph.nodes[new].position == (10.0, 20.0)
    assert editor.undo_stack.count() == 1 and editor.undo_stack.undoText() == "Add Conv2d"
    roundtrip(editor, before)


def test_refusal_returns_and_emits_the_reason(editor, qtbot):
    with qtbot.waitSignal(editor.refused) as sig:
        reason = editor.add_node("NoSuchLayer", (0, 0))
    assert reason == sig.args[0] and "unknown layer type 'NoSuchLayer'" in reason
    assert editor.set_param("conv1", "out_channels", 0) == "out_channels must be >= 1, got 0"
    assert "cycle" in editor.connect("fc2", "out", "conv1", "in")
    assert editor.undo_stack.count() == 0


def test_remove_nodes_restores_wires_on_undo(editor):
    before = state(editor.graph)
    editor.select(["relu1", "fc1"])
    assert editor.remove_nodes(["relu1"]) is None
    assert "relu1" not in editor.graph.nodes and editor.selection == ["fc1"]
    roundtrip(editor, before)


def test_connect_on_occupied_single_input_replaces_the_wire(editor):
    before = state(editor.graph)
    assert editor.connect("conv1", "out", "flat1", "in") is None
    wires_in = [e for e in editor.graph.edges if e.dst == "flat1"]
    assert wires_in == [Edge("conv1", "flat1")]
    assert editor.undo_stack.count() == 1
    roundtrip(editor, before)


def test_disconnect_and_cut_many(editor):
    before = state(editor.graph)
    assert editor.disconnect(Edge("relu1", "pool1")) is None
    roundtrip(editor, before)
    editor.undo_stack.undo()
    assert editor.disconnect_many([Edge("conv1", "relu1"), Edge("fc1", "relu2")]) is None
    assert editor.undo_stack.count() == 1 and editor.undo_stack.undoText() == "Cut 2 wires"
    assert "there is no edge" in editor.disconnect(Edge("conv1", "fc2"))


def test_set_param_rename_move_spec(editor):
    for act in (lambda: editor.set_param("fc1", "out_features", 120),
                lambda: editor.rename("fc1", "hidden"),
                lambda: editor.move_nodes({"fc1": (5, 6), "fc2": (7, 8)}),
                lambda: editor.set_spec(InputSpec((3, 32, 32)), 100)):
        before = state(editor.graph)
        assert act() is None
        roundtrip(editor, before)
    count = editor.undo_stack.count()
    assert editor.move_nodes({"fc1": editor.graph.nodes["fc1"].position}) is None
    assert editor.undo_stack.count() == count  # a drag that went nowhere is no edit


def test_group_collapse_ungroup(editor):
    before = state(editor.graph)
    assert editor.group("features", ["conv1", "relu1", "pool1"]) is None
    gid = editor.last_group
    assert editor.graph.groups[gid].nodes == ["conv1", "relu1", "pool1"]
    roundtrip(editor, before)
    assert "groups must nest" in editor.group("across", ["pool1", "flat1"])  # half in, half out
    assert "same nodes" in editor.group("again", ["conv1", "relu1", "pool1"])
    assert editor.group("inner", ["conv1", "relu1"]) is None  # a group inside the group
    inner = editor.last_group
    editor.undo_stack.undo()
    assert inner not in editor.graph.groups
    mid = state(editor.graph)
    assert editor.set_collapsed(gid, False) is None
    assert editor.graph.groups[gid].collapsed is False
    roundtrip(editor, mid)
    assert editor.ungroup(gid) is None and not editor.graph.groups
    editor.undo_stack.undo()
    assert gid in editor.graph.groups
    assert editor.remove_nodes([gid]) is None  # a group id stands for its nodes
    assert "conv1" not in editor.graph.nodes and not editor.graph.groups


def test_copy_paste_round_trip_through_the_system_clipboard(editor):
    text = editor.copy(["conv1", "relu1"])
    data = QGuiApplication.clipboard().mimeData()
    assert data.hasFormat(GRAPH_MIME) and json.loads(data.text())["nodes"][0]["id"] == "conv1"
    before = state(editor.graph)
    new = editor.paste(at=(500, 600))
    assert isinstance(new, list) and len(new) == 2 and editor.selection == new
    a, b = (editor.graph.nodes[i] for i in new)
    assert (a.type, b.type) == ("Conv2d", "ReLU") and a.params == editor.graph.nodes["conv1"].params
    assert a.position == (500.0, 600.0) and Edge(a.id, b.id) in editor.graph.edges
    assert editor.undo_stack.undoText() == "Paste 2 nodes"
    roundtrip(editor, before)
    assert editor.paste(text) != editor.paste(text)  # fresh ids every time


@pytest.mark.parametrize("text, reason", [
    ("not json", "not JSON"),
    ('{"kind": "other"}', "does not hold Torch Studio nodes"),
    ('{"kind": "torch-studio-nodes", "version": 1, "nodes": [{"id": "a", "type": "Linear", '
     '"params": {"out_features": -1}}]}', "out_features must be >= 1"),
])
def test_paste_of_bad_text_is_refused_and_changes_nothing(editor, text, reason):
    before = state(editor.graph)
    assert reason in editor.paste(text)
    assert state(editor.graph) == before and editor.undo_stack.count() == 0


def test_duplicate_and_cut(editor):
    new = editor.duplicate(["fc1", "relu2"])
    assert len(new) == 2 and editor.undo_stack.count() == 1
    x, y = editor.graph.nodes["fc1"].position
    assert editor.graph.nodes[new[0]].position == (x + 40, y + 40)
    assert editor.cut(["fc2"]) is None and "fc2" not in editor.graph.nodes
    assert editor.paste() and len(editor.graph.nodes_of_type("Linear")) == 3


def test_set_graph_clears_history_and_selection(editor, graph, qtbot):
    editor.add_node("ReLU", (0, 0))
    editor.select(["conv1"])
    other = graph.copy()
    with qtbot.waitSignal(editor.graph_replaced):
        editor.set_graph(other)
    assert editor.graph is other and editor.undo_stack.count() == 0 and editor.selection == []


def test_selection_signal(editor, qtbot):
    with qtbot.waitSignal(editor.selection_changed) as sig:
        editor.select(["fc1", "nope", "fc1"])
    assert sig.args[0] == ["fc1"]
    editor.select_all()
    assert len(editor.selection) == len(editor.graph.nodes)


def test_auto_layout_is_one_move_step(editor):
    before = state(editor.graph)
    for i, node in enumerate(editor.graph):
        node.position = (0.0, 37.0 * i)
    before = state(editor.graph)
    assert editor.auto_layout() is None
    assert editor.undo_stack.count() == 1
    xs = [editor.graph.nodes[i].position[0] for i in editor.graph.topological_order()]
    assert xs == sorted(xs) and len(set(xs)) == len(xs)
    roundtrip(editor, before)
