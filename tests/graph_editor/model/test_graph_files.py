"""Graph files: round trip, migration, atomic save, and one clear error for every bad file."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graph_editor.model import (
    SCHEMA_VERSION,
    GraphFileError,
    graph_from_dict,
    graph_to_dict,
    load_graph,
    loads,
    save_graph,
    validate,
)
from tests.graph_editor.graph_testing import TEMPLATES, lenet_graph


def good() -> dict:
    return graph_to_dict(lenet_graph())


def test_round_trip_is_exact(tmp_path):
    g = lenet_graph()
    g.metadata["description"] = "a test"
    g.nodes["conv1"].label = "first conv"
    path = tmp_path / "net.graph.json"
    save_graph(g, path)
    assert graph_to_dict(load_graph(path)) == graph_to_dict(g)


def test_every_template_round_trips():
    for path in TEMPLATES.glob("*.graph.json"):
        data = json.loads(path.read_text())
        assert graph_to_dict(load_graph(path)) == data


def test_save_is_atomic_and_a_failed_save_keeps_the_old_file(tmp_path):
    path = tmp_path / "net.graph.json"
    save_graph(lenet_graph(), path)
    before = path.read_text()
    g = lenet_graph()
    g.metadata["bad"] = {1, 2}  # not JSON: the save fails before touching the file
    with pytest.raises(TypeError):
        save_graph(g, path)
    assert path.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["net.graph.json"]  # no temp file left behind


def edit(fn) -> str:
    data = good()
    fn(data)
    return json.dumps(data)


def _set_param(name, value):
    return lambda d: d["nodes"][1]["params"].__setitem__(name, value)


BAD = {
    "corrupt JSON": ('{"schema_version": 2, "nodes": [}', None, None, "not valid JSON"),
    "truncated": (json.dumps(good())[:300], None, None, "truncated"),
    "not an object": ("[1, 2]", None, None, "JSON object"),
    "missing schema_version": (edit(lambda d: d.pop("schema_version")), None, "schema_version", "missing"),
    "schema_version not a number": (edit(lambda d: d.update(schema_version="2")), None, "schema_version",
                                    "integer"),
    "newer schema_version": (edit(lambda d: d.update(schema_version=SCHEMA_VERSION + 1)), None, "schema_version",
                             "newer"),
    "unknown version": (edit(lambda d: d.update(schema_version=0)), None, "schema_version", "not a known"),
    "unknown top-level field": (edit(lambda d: d.update(colour="red")), None, "colour", "unknown field"),
    "unknown node field": (edit(lambda d: d["nodes"][1].update(colour="red")), "conv1", "colour", "unknown field"),
    "wrong param type": (edit(_set_param("out_channels", "six")), "conv1", "params.out_channels", "integer"),
    "wrong param list": (edit(_set_param("kernel_size", [5, "x"])), "conv1", "params.kernel_size", "integers"),
    "unknown param": (edit(_set_param("colour", 1)), "conv1", "params.colour", "no parameter"),
    "params not an object": (edit(lambda d: d["nodes"][1].update(params=[1])), "conv1", "params", "object"),
    "bad position": (edit(lambda d: d["nodes"][1].update(position=[1])), "conv1", "position", "[x, y]"),
    "infinite position": ('{"schema_version": 2, "input": {"shape": [4]}, "num_classes": 2, "nodes": '
                          '[{"id": "a", "type": "Input", "position": [0, Infinity]}]}', "a", "position", "[x, y]"),
    "node id not an identifier": (edit(lambda d: d["nodes"][1].update(id="conv 1")), None, "nodes[1].id",
                                  "identifier"),
    "duplicate id": (edit(lambda d: d["nodes"][2].update(id="conv1")), "conv1", "id", "two nodes"),
    "dangling edge": (edit(lambda d: d["edges"][0].update(dst="ghost")), "ghost", "edges[0].dst", "does not exist"),
    "bad input port": (edit(lambda d: d["edges"][0].update(dst_port="weights")), "conv1", "dst_port",
                       "no input port 'weights'"),
    "bad output port": (edit(lambda d: d["edges"][0].update(src_port="extra")), "input", "src_port",
                        "no output port 'extra'"),
    "duplicate edge": (edit(lambda d: d["edges"].append(d["edges"][0])), None, "edges[13]", "twice"),
    "edges not a list": (edit(lambda d: d.update(edges={"a": 1})), None, "edges", "a list"),
    "bad input shape": (edit(lambda d: d["input"].update(shape=[1, 0, 32])), None, "input.shape", "positive"),
    "bad dtype": (edit(lambda d: d["input"].update(dtype="float8")), None, "input.dtype", "one of"),
    "bad class count": (edit(lambda d: d.update(num_classes=0)), None, "num_classes", "at least 1"),
    "group names a missing node": (edit(lambda d: d.update(groups=[{"id": "g", "name": "G", "nodes": ["ghost"]}])),
                                   None, "groups[0].nodes", "ghost"),
    "node in two groups": (edit(lambda d: d.update(groups=[{"id": "a", "name": "A", "nodes": ["conv1"]},
                                                           {"id": "b", "name": "B", "nodes": ["conv1"]}])),
                           "conv1", "groups[1].nodes", "two groups"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_file_gives_one_error_naming_node_and_field(case, tmp_path):
    text, node, field, words = BAD[case]
    path = tmp_path / "bad.graph.json"
    path.write_text(text)
    with pytest.raises(GraphFileError) as info:
        load_graph(path)
    err = info.value
    assert (err.node, err.field) == (node, field)
    message = str(err)
    assert words in message and str(path) in message
    if node:
        assert f"node '{node}'" in message
    if field:
        assert f"field '{field}'" in message


def test_unreadable_and_missing_files(tmp_path):
    with pytest.raises(GraphFileError, match="file not found"):
        load_graph(tmp_path / "nope.graph.json")
    binary = tmp_path / "bin.graph.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(GraphFileError, match="cannot read"):
        load_graph(binary)


def test_out_of_range_values_load_and_validation_reports_them():
    # A hand-edited value of the right type but out of range is kept so the editor can show and fix it.
    g = loads(edit(_set_param("out_channels", -3)))
    assert g.nodes["conv1"].params["out_channels"] == -3
    problems = validate(g).problems
    assert any(p.node == "conv1" and p.field == "out_channels" and ">= 1" in p.message for p in problems)


def v1_file() -> dict:
    """The same LeNet written in schema version 1."""
    v2 = good()
    v1 = {k: v for k, v in v2.items() if k not in ("input", "edges")}
    v1.update(schema_version=1, input_shape=v2["input"]["shape"], input_dtype=v2["input"]["dtype"],
              edges=[f"{e['src']}.{e['src_port']} -> {e['dst']}.{e['dst_port']}" for e in v2["edges"]])
    return v1


def test_v1_file_migrates_to_v2(tmp_path):
    path = tmp_path / "old.graph.json"
    path.write_text(json.dumps(v1_file()))
    assert graph_to_dict(load_graph(path)) == good()


def test_bad_v1_edge_is_located():
    data = v1_file()
    data["edges"][3] = "conv1 to relu1"
    with pytest.raises(GraphFileError) as info:
        graph_from_dict(copy.deepcopy(data))
    assert info.value.field == "edges[3]"


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 300) | st.floats(allow_nan=True) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)


def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, (*prefix, i))


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_any_hand_edit_loads_or_gives_one_file_error(data):
    """Replace or delete any value anywhere in a good file: the result loads, or fails with a
    GraphFileError; nothing else ever escapes."""
    doc = good()
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(list(_paths(doc))[1:]))
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        if data.draw(st.booleans()) and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = data.draw(JSON_VALUES)
    try:
        graph = loads(json.dumps(doc))
    except GraphFileError as exc:
        assert exc.message
        return
    validate(graph)  # whatever loaded, validation copes with it


def _chain_file(n: int) -> str:
    """Input -> n ReLUs -> Linear -> Output, as a file would hold it."""
    nodes = [{"id": "input", "type": "Input"}] + [{"id": f"r{i}", "type": "ReLU"} for i in range(n)]
    nodes += [{"id": "fc", "type": "Linear", "params": {"out_features": 2}}, {"id": "output", "type": "Output"}]
    ids = [node["id"] for node in nodes]
    edges = [{"src": a, "dst": b} for a, b in zip(ids, ids[1:], strict=False)]
    return json.dumps({"schema_version": 2, "input": {"shape": [4]}, "num_classes": 2, "nodes": nodes,
                       "edges": edges})


def test_a_long_chain_loads_and_validates():
    """Loading used `edge in graph.edges` per edge (quadratic); benchmarks/graph_load.py times it."""
    g = loads(_chain_file(5000))
    assert len(g) == 5003 and len(g.edges) == 5002
    inf = validate(g)
    assert inf.ok and inf.order[0] == "input" and inf.order[-1] == "output"


def test_a_duplicate_edge_deep_in_a_long_file_is_still_found():
    data = json.loads(_chain_file(3000))
    data["edges"].append(dict(data["edges"][1500]))
    with pytest.raises(GraphFileError) as info:
        graph_from_dict(data)
    assert info.value.field == "edges[3002]" and "twice" in info.value.message


HOSTILE = {
    "1000-deep nesting": ('{"schema_version": 2, "metadata": ' + "[" * 1000 + "]" * 1000 + "}",
                          None, None, "levels deep"),
    "100000-deep nesting": ("[" * 100000 + "]" * 100000, None, None, "levels deep"),
    "200-deep metadata": (edit(lambda d: d.update(metadata={"a": json.loads("[" * 200 + "]" * 200)})),
                          None, "metadata", "levels deep"),
    "5000-digit schema_version": ('{"schema_version": ' + "9" * 5000 + "}", None, None, "5000 digits at line 1"),
    "5000-digit parameter": (json.dumps(good()).replace('"out_channels": 6', '"out_channels": ' + "7" * 5000),
                             None, None, "5000 digits"),
    "absurd out_features": (edit(_set_param("out_channels", 1e40)), "conv1", "params.out_channels",
                            "absurdly large"),
    "absurd input dimension": (edit(lambda d: d["input"].update(shape=[1, 2**40, 2])), None, "input.shape",
                               "positive integers up to"),
    "absurd class count": (edit(lambda d: d.update(num_classes=10**30)), None, "num_classes", "at most"),
    "a node id of 5000 characters": (edit(lambda d: d["nodes"][1].update(id="c" * 5000)), None, "nodes[1].id",
                                     "at most 200 characters"),
    "huge position": (edit(lambda d: d["nodes"][1].update(position=[10**400, 0])), "conv1", "position", "[x, y]"),
    "keyword id of an unknown type with deep params": (
        edit(lambda d: d["nodes"].append({"id": "x", "type": "Nope", "params": {"p": json.loads("[" * 100 + "]" * 100)}})),
        "x", "params", "levels deep"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_file_gives_a_file_error_not_a_python_error(case, tmp_path):
    text, node, field, words = HOSTILE[case]
    path = tmp_path / "bad.graph.json"
    path.write_text(text)
    with pytest.raises(GraphFileError) as info:
        load_graph(path)
    assert (info.value.node, info.value.field) == (node, field)
    assert words in str(info.value) and str(path) in str(info.value)
    assert len(str(info.value)) < 400  # the message names the problem; it does not print the number


def test_cli_validate_and_summary_report_a_hostile_file_without_a_traceback(tmp_path, capsys):
    from studio.cli import main

    for text in HOSTILE["1000-deep nesting"][0], HOSTILE["5000-digit schema_version"][0]:
        path = tmp_path / "bad.graph.json"
        path.write_text(text)
        for command in "validate", "summary":
            with pytest.raises(SystemExit) as exit_info:
                main([command, str(path)])
            err = capsys.readouterr().err
            assert exit_info.value.code == 1
            assert err.startswith(f"error: {path}:") and "Traceback" not in err


def test_a_saved_graph_gets_the_mode_a_plain_open_would_give_it(tmp_path):
    """mkstemp makes 0600 files: a graph saved for a team to read must not be private by accident."""
    import os

    graph = lenet_graph()
    old = os.umask(0o022)
    try:
        save_graph(graph, tmp_path / "new.graph.json")
        assert (tmp_path / "new.graph.json").stat().st_mode & 0o777 == 0o644
        (tmp_path / "kept.graph.json").write_text("{}")
        os.chmod(tmp_path / "kept.graph.json", 0o640)
        save_graph(graph, tmp_path / "kept.graph.json")     # an existing file keeps its mode
        assert (tmp_path / "kept.graph.json").stat().st_mode & 0o777 == 0o640
    finally:
        os.umask(old)
