"""Fuzz: a graph file mangled as text or as JSON either loads, or fails with one GraphFileError that
says where; whatever loads validates without raising and saves to a file that loads again.

Bounded for ``make test``: fixed example counts, no deadline (the machine may be shared).
"""

from __future__ import annotations

import json
import keyword
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graph_editor.model import Graph, GraphFileError, dumps, graph_from_dict, loads, validate
from tests.graph_editor.graph_testing import TEMPLATES

SMALL = [(TEMPLATES / f"{name}.graph.json").read_text() for name in ("mlp", "lenet5", "digits_cnn")]

# What a hostile or broken file holds: structure, hostile numbers, names Python reserves, odd text.
TOKENS = ["[", "]", "{", "}", ",", ":", '"', "null", "true", "NaN", "Infinity", "-Infinity", "-1", "0", "1e400",
          "2147483648", "9" * 4400, "[" * 3000, "{\"a\":" * 200, '"class"', '"import"', '"__init__"', '"\\ud800"',
          "\x00", "\u00e9", '"out_features"', '"src"', '"schema_version"', "0.5", "1e-320"]

# Values put anywhere in a decoded file.
# Lists and dicts are made anew for every draw: a later edit may write inside one, and a shared
# object would carry that edit into the next example (hypothesis then reports a flaky strategy).
HOSTILE = st.one_of(
    st.sampled_from([None, True, 0, -1, 2**31, 2**63, 10**40, 1e40, float("nan"), float("inf"), "", "class",
                     "def", "input", "in"]),
    st.sampled_from([lambda: [], lambda: {}, lambda: [[[[[[]]]]]], lambda: ["x"],
                     lambda: {"id": "class"}]).map(lambda make: make()),
    st.integers(), st.floats(), st.text(max_size=6),
    st.sampled_from([65, 900, 3000]).map(lambda n: _nested(n)),
)


def _nested(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


def _names_where(err: GraphFileError) -> bool:
    msg = err.message
    return (err.node is not None or err.field is not None or re.search(r"line \d+", msg) is not None
            or "JSON object" in msg)


def _check_loaded(graph: Graph) -> None:
    inf = validate(graph)
    assert all(p.node is None or p.node in graph.nodes for p in inf.problems)
    assert inf.ok or any(p.severity == "error" for p in inf.problems)
    if any(keyword.iskeyword(n) for n in graph.nodes):
        assert not inf.ok                                  # build would write `self.class`
    again = loads(dumps(graph))                            # a graph that loaded saves to a file that loads
    assert list(again.nodes) == list(graph.nodes) and again.edges == graph.edges


def _outcome(text: str) -> None:
    try:
        graph = loads(text)
    except GraphFileError as err:
        assert err.message and _names_where(err), err
        assert len(str(err)) < 1000                        # names the problem; never echoes the file
        return
    _check_loaded(graph)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(SMALL), st.lists(st.tuples(st.sampled_from(["insert", "replace", "delete", "cut"]),
                                                  st.floats(0, 1), st.floats(0, 0.05), st.sampled_from(TOKENS)),
                                        min_size=1, max_size=4))
def test_a_file_mangled_as_text_loads_or_fails_saying_where(text, edits):
    for op, at, span, token in edits:
        i, j = int(at * len(text)), int(at * len(text)) + int(span * len(text))
        if op == "insert":
            text = text[:i] + token + text[i:]
        elif op == "replace":
            text = text[:i] + token + text[j:]
        elif op == "delete":
            text = text[:i] + text[j:]
        else:
            text = text[:i]
    _outcome(text)


def _paths(obj, prefix=()):
    """Every place in ``obj`` down to 6 levels (what the fuzz put deeper is not walked again)."""
    yield prefix
    if len(prefix) < 6 and isinstance(obj, dict | list):
        for key, value in (obj.items() if isinstance(obj, dict) else enumerate(obj)):
            yield from _paths(value, (*prefix, key))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(SMALL), st.data())
def test_hostile_values_anywhere_load_or_fail_saying_where(text, data):
    doc = json.loads(text)
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(list(_paths(doc))[1:]))
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        if isinstance(parent, dict) and data.draw(st.booleans()):
            parent[data.draw(st.sampled_from([path[-1], "id", "type", "params", "extra"]))] = data.draw(HOSTILE)
        else:
            parent[path[-1]] = data.draw(HOSTILE)
    try:
        graph = graph_from_dict(doc)
    except GraphFileError as err:
        assert err.message and _names_where(err), err
        assert len(str(err)) < 1000
        return
    _check_loaded(graph)
