"""graph_diff: a pure function over graph-file dicts."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from studio.training.graph_diff import diff_graphs

ROOT = Path(__file__).resolve().parents[3]


def _graph() -> dict:
    return json.loads((ROOT / "assets/templates/digits_cnn.graph.json").read_text())


def test_same_graph_has_no_difference_even_when_moved_and_relabelled():
    a = _graph()
    b = copy.deepcopy(a)
    for n in b["nodes"]:
        n["position"] = [n["position"][0] + 50, 3.0]
        n["label"] = "renamed"
    d = diff_graphs(a, b)
    assert d.empty
    assert d.lines() == ["The two graphs are the same network."]


def test_added_removed_changed_and_rewired():
    a = _graph()
    b = copy.deepcopy(a)
    victim = b["nodes"].pop(1)
    b["edges"] = [e for e in b["edges"] if victim["id"] not in (e["src"], e["dst"])]
    b["nodes"].append({"id": "extra_dropout", "type": "Dropout", "params": {"p": 0.3}, "position": [0, 0]})
    changed = next(n for n in b["nodes"] if n["params"])
    name = next(iter(changed["params"]))
    old = changed["params"][name]
    changed["params"][name] = "something else"
    b["num_classes"] = 7
    d = diff_graphs(a, b)
    assert d.added == [("extra_dropout", "Dropout")]
    assert d.removed == [(victim["id"], victim["type"])]
    assert [c.node_id for c in d.changed] == [changed["id"]]
    assert d.changed[0].params == {name: (old, "something else")}
    assert d.edges_removed and all(victim["id"] in e for e in d.edges_removed)
    text = "\n".join(d.lines())
    assert "+ extra_dropout (Dropout)" in text and f"- {victim['id']}" in text
    assert "~ classes: 10 -> 7" in text


def test_lists_and_tuples_compare_equal_and_unset_params_show():
    a = {"nodes": [{"id": "c", "type": "Conv2d", "params": {"kernel_size": [3, 3]}}], "edges": []}
    b = {"nodes": [{"id": "c", "type": "Conv2d", "params": {"kernel_size": (3, 3), "bias": False}}], "edges": []}
    d = diff_graphs(a, b)
    assert d.changed[0].params == {"bias": (None, False)}
    assert "bias: (unset) -> False" in d.lines()[0]


def test_malformed_side_is_named():
    with pytest.raises(ValueError, match="second graph"):
        diff_graphs({"nodes": []}, {"edges": []})
