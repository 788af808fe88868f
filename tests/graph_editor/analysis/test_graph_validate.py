"""Validation problems, each at its node; catalog and builders agree; build errors are located."""

from __future__ import annotations

import math

import pytest
import torch

from graph_editor.analysis import analyze
from graph_editor.building import BuildError, build_module
from graph_editor.building.modules import builder_types
from graph_editor.model import Edge, Graph, InputSpec, all_layers, categories, get_layer, validate
from graph_editor.model.layout import layered_layout
from tests.graph_editor.graph_testing import lenet_graph


def problems_of(g: Graph) -> list[tuple[str | None, str]]:
    return [(p.node, p.message) for p in validate(g).problems if p.severity == "error"]


def test_a_good_graph_has_no_problems_and_every_shape():
    lenet = lenet_graph()
    inf = validate(lenet, batch=4)
    assert inf.ok and not inf.problems
    assert inf.shapes["pool2"] == (4, 16, 5, 5)
    assert inf.shapes["flatten"] == (4, 400)
    assert inf.order.index("conv1") < inf.order.index("conv2")


def test_cycle_is_reported_on_its_nodes():
    lenet = lenet_graph()
    lenet.add_edge(Edge("relu2", "conv1", dst_port="in"), check=False)  # as a hand-edited file can
    lenet.remove_edge(Edge("pool1", "conv2"))
    lenet.add_edge(Edge("pool1", "conv2"), check=False)
    nodes = {n for n, m in problems_of(lenet) if "cycle" in m}
    assert {"conv1", "relu1", "pool1", "conv2", "relu2"} <= nodes
    assert "fc3" not in nodes  # downstream of the cycle, not on it


def test_missing_and_doubled_inputs():
    lenet = lenet_graph()
    lenet.remove_edge(Edge("relu1", "pool1"))
    lenet.add_edge(Edge("input", "fc2"), check=False)
    found = problems_of(lenet)
    assert ("pool1", "input 'in' is not connected") in found
    assert ("fc2", "input 'in' is connected twice (relu3, input)") in found


def test_merge_needs_two_inputs():
    g = Graph(InputSpec((4,)), 4)
    g.chain(("Input", "input"), ("Add", "add"), ("Output", "output"))
    assert ("add", "needs at least 2 inputs on 'in', has 1") in problems_of(g)


def test_unknown_type_and_out_of_range_param():
    lenet = lenet_graph()
    lenet.add_node("Conv4d", "vol", check=False)
    lenet.nodes["conv1"].params["stride"] = [0, 1]
    found = validate(lenet).problems
    assert any(p.node == "vol" and p.field == "type" and "unknown layer type 'Conv4d'" in p.message for p in found)
    assert any(p.node == "conv1" and p.field == "stride" and p.message == "stride must be >= 1, got 0"
               for p in found)


def test_linear_mismatch_message_names_both_sizes():
    lenet = lenet_graph()
    lenet.remove_node("flatten")
    lenet.connect("pool2", "fc1")
    lenet.nodes["fc1"].params["in_features"] = 400
    assert ("fc1", "Linear fc1 expects 400 input features but receives 16x5x5: insert a Flatten before it "
                   "(16x5x5 flattens to 400; without it Linear reads only the last dim, 5)") in problems_of(lenet)
    lenet.nodes["fc1"].params["in_features"] = 300              # no Flatten would fit: no advice to add one
    assert ("fc1", "Linear fc1 expects 300 input features, receives 16x5x5 (Linear reads the last dim, 5; "
                   "flattened it would be 400)") in problems_of(lenet)
    lenet.nodes["fc1"].params["in_features"] = 400
    lenet.add_node("Flatten", "flatten")
    lenet.remove_edge(Edge("pool2", "fc1"))
    lenet.connect("pool2", "flatten")
    lenet.connect("flatten", "fc1")
    lenet.nodes["fc1"].params["in_features"] = 256
    assert ("fc1", "Linear fc1 expects 256 input features, receives 400") in problems_of(lenet)


def test_wrong_class_count_and_missing_io_nodes():
    lenet = lenet_graph()
    lenet.num_classes = 7
    assert ("output", "Output expects logits of shape 7 (one per class), receives 10") in problems_of(lenet)
    g = Graph()
    g.add_node("ReLU", "r")
    assert {(None, "the graph has no Input node"), (None, "the graph has no Output node")} <= set(problems_of(g))


def test_unused_branch_is_a_warning_not_an_error():
    lenet = lenet_graph()
    lenet.add_node("ReLU", "spare")
    lenet.connect("conv1", "spare")
    inf = validate(lenet)
    assert inf.ok
    assert [(p.node, p.severity) for p in inf.problems] == [("spare", "warning")]


def test_integer_input_must_be_embedded_first():
    g = Graph(InputSpec((3,), "int64"), 4)
    g.chain(("Input", "input"), ("Linear", "fc", {"out_features": 4}), ("Output", "output"))
    assert any(n == "fc" and "Embedding" in m for n, m in problems_of(g))
    g = Graph(InputSpec((3,), "int64"), 4)
    g.chain(("Input", "input"), ("Embedding", "embed", {"num_embeddings": 5, "embedding_dim": 2}),
            ("Flatten", "flatten"), ("Linear", "fc", {"out_features": 4}), ("Output", "output"))
    assert validate(g).ok
    assert build_module(g)(torch.tensor([[0, 1, 4]])).shape == (1, 4)


def test_build_error_lists_every_problem_by_node():
    lenet = lenet_graph()
    lenet.nodes["conv1"].params["out_channels"] = 0
    lenet.remove_edge(Edge("relu3", "fc2"))
    with pytest.raises(BuildError) as info:
        build_module(lenet)
    nodes = {p.node for p in info.value.problems}
    assert {"conv1", "fc2"} <= nodes
    assert "conv1" in str(info.value) and "fc2" in str(info.value)
    with pytest.raises(BuildError):
        analyze(lenet)


def test_ids_pytorch_reserves_are_a_located_build_error():
    g = Graph(InputSpec((4,)), 4)
    g.chain(("Input", "input"), ("Linear", "forward", {"out_features": 4}), ("Output", "output"))
    with pytest.raises(BuildError) as info:
        build_module(g, device="meta")
    assert info.value.problems[0].node == "forward"


def test_catalog_and_builders_cover_the_same_types():
    assert {s.type for s in all_layers()} == builder_types()


def test_catalog_entries_are_complete():
    for spec in all_layers():
        assert spec.doc and spec.category and spec.display
        assert spec.check_params({}) == spec.check_params(spec.defaults())  # defaults pass their own checks
        for p in spec.params:
            assert p.doc, f"{spec.type}.{p.name} has no doc"
    palette = categories()
    assert list(palette)[0] == "Input / Output"
    assert sum(len(v) for v in palette.values()) == len(all_layers())
    assert get_layer("Conv2d").param("groups").minimum == 1


def test_layered_layout_puts_every_node_right_of_its_inputs():
    g = lenet_graph()
    g.add_node("ReLU", "side")
    g.connect("conv1", "side")
    g.add_node("Add", "merge")
    g.connect("relu1", "merge")
    g.connect("side", "merge")
    pos = layered_layout(g, wrap=math.inf)
    assert set(pos) == set(g.nodes)
    assert len(set(pos.values())) == len(pos)
    for e in g.edges:
        assert pos[e.dst][0] > pos[e.src][0]
    assert pos["pool2"][1] == pos["conv2"][1]  # a chain without forks stays on one row


def test_a_wire_doubled_by_a_script_is_a_problem():
    g = Graph(InputSpec((4,)), 4)
    g.chain(("Input", "input"), ("Add", "add"), ("Output", "output"))
    g.add_edge(Edge("input", "add"), check=False)  # Connect refuses this; a script can still do it
    assert ("add", "the wire from input to 'in' appears twice") in problems_of(g)


def test_a_python_keyword_id_is_refused_by_validation_so_build_never_writes_bad_code():
    g = Graph(InputSpec((4,)), 4)
    g.chain(("Input", "input"), ("Linear", "class", {"out_features": 4}), ("Output", "output"))
    inf = validate(g)
    assert not inf.ok
    [problem] = [p for p in inf.problems if p.severity == "error"]
    assert (problem.node, problem.field) == ("class", "id") and "keyword" in problem.message
    with pytest.raises(BuildError) as info:  # not a SyntaxError from fx's generated forward()
        build_module(g, device="meta")
    assert info.value.problems[0].node == "class"


def test_a_tensor_beyond_any_device_is_a_problem_not_a_crash_later():
    g = Graph(InputSpec((2**31 - 1, 2**31 - 1)), 10)
    g.chain(("Input", "input"), ("Flatten", "flat"), ("Linear", "fc", {"out_features": 10}), ("Output", "output"))
    assert [(n, "beyond any device" in m) for n, m in problems_of(g)] == [("input", True)]
    g = Graph(InputSpec((1, 2**15, 2**15)), 10)
    g.chain(("Input", "input"), ("Conv2d", "conv", {"out_channels": 8, "kernel_size": 1}), ("Flatten", "flat"),
            ("Linear", "fc", {"out_features": 10}), ("Output", "output"))
    assert [(n, "beyond any device" in m) for n, m in problems_of(g)] == [("conv", True)]


def test_a_cycle_through_a_long_ring_is_reported_in_linear_time():
    """5000 nodes in a ring: every one is on the cycle (the old report asked `reaches` per node)."""
    g = Graph(InputSpec((4,)), 4)
    g.add_node("Input", "input")
    for i in range(5000):  # unchecked, as a file loads: chain() checks each wire for cycles
        g.add_node("ReLU", f"r{i}", check=False)
        g.add_edge(Edge(f"r{i - 1}" if i else "input", f"r{i}"), check=False)
    g.add_edge(Edge("r4999", "r0"), check=False)
    g.add_node("Output", "output")
    on_cycle = {n for n, m in problems_of(g) if "cycle" in m}
    assert on_cycle == {f"r{i}" for i in range(5000)}


def test_a_node_wired_to_itself_is_on_a_cycle():
    g = Graph(InputSpec((4,)), 4)
    g.chain(("Input", "input"), ("ReLU", "r"), ("Linear", "fc", {"out_features": 4}), ("Output", "output"))
    g.add_edge(Edge("r", "r"), check=False)
    assert {n for n, m in problems_of(g) if "cycle" in m} == {"r"}


def test_weights_past_what_torch_can_size_are_a_located_build_error_in_the_summary():
    """Each size is legal (at most 2**31-1) but 2**31-1 x 2**31-1 weights overflow torch's storage size:
    analyze (the summary) names the node instead of crashing with a RuntimeError."""
    g = Graph(InputSpec((64,)), 10)
    g.chain(("Input", "input"), ("Linear", "fc1", {"out_features": 2**31 - 1}),
            ("Linear", "fc2", {"out_features": 2**31 - 1}), ("Linear", "fc3", {"out_features": 10}),
            ("Output", "output"))
    assert validate(g).ok
    with pytest.raises(BuildError) as info:
        analyze(g)
    assert info.value.problems[0].node == "fc2" and "PyTorch refuses this Linear" in info.value.problems[0].message


def test_logits_that_do_not_depend_on_the_input_are_refused_at_the_output():
    """A learnable Parameter wired straight to the Output has one row for the whole batch."""
    g = Graph(InputSpec((4,)), 3)
    g.add_node("Input", "input")
    g.add_node("Parameter", "p", {"shape": [3]})
    g.add_node("Output", "output")
    g.add_edge(Edge("p", "output"))
    problems = [p for p in validate(g, batch=2).problems if p.node == "output"]
    assert problems and "one row of logits per sample" in problems[0].message


def test_weights_that_do_not_fit_the_device_stay_an_out_of_memory_error(monkeypatch):
    """Placing the weights on a full GPU raises torch.OutOfMemoryError (a RuntimeError): that is the
    device's verdict, not the graph's, and the worker refuses it as kind "oom" (it said "graph": "PyTorch
    refuses this Linear", on an H200 with weights of 1.2 times its memory)."""
    import graph_editor.building.fx as fx

    def full_device(params, shapes):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 160.00 GiB")

    monkeypatch.setattr(fx, "get_builder", lambda type_: full_device)
    g = Graph(InputSpec((64,)), 10)
    g.chain(("Input", "input"), ("Linear", "fc", {"out_features": 10}), ("Output", "output"))
    with pytest.raises(torch.OutOfMemoryError):
        build_module(g)
