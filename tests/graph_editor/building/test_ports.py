"""Layers with several outputs: Split and Chunk, their ports through validation, building, analysis,
import, files, undo/redo, copy/paste, the source writer and ONNX."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from exporters import ExportOptions, export, from_graph
from exporters.formats.python_format import load_generated
from graph_editor.analysis import analyze
from graph_editor.building import build_module
from graph_editor.importer import import_module
from graph_editor.model import (
    CommandError,
    Connect,
    Edge,
    Graph,
    GraphFileError,
    InputSpec,
    RemoveNodes,
    SetParam,
    UndoStack,
    graph_from_dict,
    graph_to_dict,
    load_graph,
    loads,
    save_graph,
    validate,
)
from graph_editor.ui.clipboard import parse_subgraph, subgraph_json


def split_net() -> Graph:
    """x -> Linear(12) -> Reshape 3x4 -> Split [1, 2] along dim 1; part 1 feeds the head, part 0
    goes through its own Linear and joins it; Chunk's second half is never read."""
    g = Graph(InputSpec((8,)), 3, {"name": "split net"})
    g.chain(("Input", "input"), ("Linear", "fc", {"out_features": 12}), ("Reshape", "grid", {"shape": [3, 4]}),
            ("Split", "parts", {"sizes": [1, 2], "dim": 1}))
    g.add_node("Flatten", "flat0")
    g.connect("parts", "flat0")  # no port named: the first output
    g.add_node("Flatten", "flat1")
    g.connect("parts", "flat1", src_port="out1")
    g.add_node("Chunk", "halves", {"chunks": 2, "dim": 1})
    g.connect("flat1", "halves")
    g.add_node("Concat", "join", {"dim": 1})
    g.connect("flat0", "join")
    g.connect("halves", "join")  # 4 of flat1's 8 values; halves.out1 is unused
    g.chain(("Linear", "head", {"out_features": 3}), ("Output", "output"), start="join")
    return g


class SplitOracle(nn.Module):
    def __init__(self, built: nn.Module) -> None:
        super().__init__()
        self.fc, self.head = built.fc, built.head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        first, second = self.fc(x).reshape(-1, 3, 4).split([1, 2], dim=1)
        half, _ = second.flatten(1).chunk(2, dim=1)
        return self.head(torch.cat([first.flatten(1), half], dim=1))


def test_each_output_port_has_its_own_shape_and_unused_outputs_are_fine():
    inf = validate(split_net(), batch=5)
    assert inf.ok and not inf.problems, [str(p) for p in inf.problems]
    assert inf.port_shapes["parts"] == [(5, 1, 4), (5, 2, 4)]
    assert inf.shape_at("parts", "out1") == (5, 2, 4) and inf.shapes["parts"] == (5, 1, 4)
    assert inf.shapes["flat1"] == (5, 8) and inf.port_shapes["halves"] == [(5, 4), (5, 4)]
    assert inf.shapes["join"] == (5, 8)


def test_built_graph_equals_hand_written_pytorch_and_counts_like_flop_counter():
    g = split_net()
    torch.manual_seed(0)
    built = build_module(g).eval()
    x = torch.randn(5, 8)
    with torch.no_grad():
        assert torch.equal(built(x), SplitOracle(built)(x))
    stats = analyze(g, batch=5)
    with FlopCounterMode(display=False) as counter:
        build_module(g, device="meta")(x.to("meta"))
    assert stats.total_flops == counter.get_total_flops()
    assert stats.by_id()["parts"].activation_bytes == 5 * 12 * 4  # both parts


def test_a_wire_from_a_port_the_node_no_longer_has_names_node_and_port():
    g = split_net()
    stack = UndoStack()
    stack.push(SetParam(g, "parts", "sizes", [3]))  # one part now, but flat1 still reads out1
    problems = [p for p in validate(g).problems if p.severity == "error"]
    assert any(p.node == "flat1" and p.port == "in" and "parts.out1" in p.message and "one output" in p.message
               for p in problems), [str(p) for p in problems]
    stack.undo()
    assert validate(g).ok
    with pytest.raises(CommandError, match=r"parts has 2 outputs \(out, out1\), not 'out2'"):
        g.connect("parts", "head", src_port="out2")
    with pytest.raises(CommandError, match="no output port 'left'"):
        g.connect("parts", "head", src_port="left")


@pytest.mark.parametrize("params, message", [
    ({"sizes": [1, 1]}, r"sizes \[1, 1\] add up to 2, but dim 1 of 3x4 has 3"),
    ({"sizes": [3], "dim": 0}, "cannot split the batch dimension"),
])
def test_split_shape_errors_name_the_field(params, message):
    g = split_net()
    for k, v in params.items():
        g.set_param("parts", k, v)
    problem = next(p for p in validate(g).problems if p.node == "parts")
    assert problem.field in ("sizes", "dim")
    assert pytest.importorskip("re").search(message, problem.message), problem.message


def test_chunk_that_torch_would_cut_into_fewer_parts_is_refused():
    g = split_net()
    g.set_param("halves", "chunks", 3)  # 8 values -> torch.chunk makes 3, 3, 2: fine
    assert validate(g).ok
    g.set_param("halves", "chunks", 6)  # 8 -> 2, 2, 2, 2: four, not six
    problem = next(p for p in validate(g).problems if p.node == "halves")
    assert "torch.chunk makes 4 (2, 2, 2, 2)" in problem.message and problem.field == "chunks"


def test_ports_survive_save_load_and_old_files_load_unchanged(tmp_path):
    g = split_net()
    path = tmp_path / "split.graph.json"
    save_graph(g, path)
    again = load_graph(path)
    assert graph_to_dict(again) == graph_to_dict(g)
    assert Edge("parts", "flat1", "out1", "in") in again.edges
    # A file that names no ports (as files before several outputs did) reads them as out/in.
    data = graph_to_dict(g)
    for e in data["edges"]:
        if e["src_port"] == "out":
            del e["src_port"]
        del e["dst_port"]
    assert graph_to_dict(graph_from_dict(data)) == graph_to_dict(g)


def test_bad_ports_in_a_file_are_named():
    data = graph_to_dict(split_net())
    data["edges"][3]["src_port"] = "left"
    with pytest.raises(GraphFileError, match="Split has no output port 'left'") as info:
        loads(json.dumps(data))
    assert info.value.node == "parts" and info.value.field == "src_port"
    data["edges"][3]["src_port"] = "out7"  # a port name a Split may have: loads, validation names it
    g = loads(json.dumps(data))
    assert any("parts.out7" in p.message and p.node == "flat0" for p in validate(g).problems)


def test_undo_redo_and_copy_paste_keep_ports():
    g = split_net()
    before = graph_to_dict(g)
    stack = UndoStack()
    stack.push(RemoveNodes(g, ["parts"]))
    assert not any(e.src == "parts" for e in g.edges)
    stack.undo()
    assert graph_to_dict(g) == before
    stack.redo()
    stack.undo()
    g.remove_edge(Edge("parts", "flat1", "out1", "in"))
    stack.push(Connect(g, Edge("parts", "flat1", "out1", "in")))
    stack.undo()
    assert Edge("parts", "flat1", "out1", "in") not in g.edges
    stack.redo()
    assert sorted(map(str, g.edges)) == sorted(str(Edge(**e)) for e in before["edges"])
    nodes, wires = parse_subgraph(subgraph_json(g, ["parts", "flat0", "flat1"]))
    assert Edge("parts", "flat1", "out1", "in") in wires and Edge("parts", "flat0", "out", "in") in wires


class Tokens(nn.Module):
    """Splits in the ways models do: by size, by sections, chunks unpacked, one part unused."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(8, 24)
        self.proj = nn.Linear(8, 8)
        self.head = nn.Linear(36, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).split(8, dim=-1)
        a, b = torch.chunk(self.proj(q), 2, dim=2)
        first, _ = torch.split(k + v, [3, 5], dim=-1)
        parts = v.chunk(4, dim=-1)
        return self.head(torch.cat([a * b, first, parts[1]], dim=-1).flatten(1))


def test_import_maps_parts_to_ports_and_round_trips_exactly():
    torch.manual_seed(3)
    module = Tokens().eval()
    result = import_module(module, (4, 8))
    g = result.graph
    splits = {n.id: n for n in g if n.type in ("Split", "Chunk")}
    assert sorted((n.type, json.dumps(n.params)) for n in splits.values()) == sorted([
        ("Split", json.dumps({"sizes": [8, 8, 8], "dim": -1})), ("Chunk", json.dumps({"chunks": 2, "dim": 2})),
        ("Split", json.dumps({"sizes": [3, 5], "dim": -1})), ("Chunk", json.dumps({"chunks": 4, "dim": -1}))])
    ports = {(e.src, e.src_port) for e in g.edges if e.src in splits}
    assert sum(1 for _, p in ports if p == "out2") == 1 and sum(1 for _, p in ports if p == "out1") == 3
    rebuilt = build_module(g).eval()
    rebuilt.load_state_dict(result.state_dict)
    x = torch.randn(3, 4, 8)
    with torch.no_grad():
        assert (rebuilt(x) - module(x)).abs().max() < 1e-6


@pytest.mark.export
def test_model_py_and_onnx_of_a_graph_with_ports(tmp_path):
    source = from_graph(split_net(), verify_batch=3)
    report = export(source, "python", tmp_path / "model.py", ExportOptions(timing_runs=1))
    assert report.ok, report.to_text()
    code = (tmp_path / "model.py").read_text()
    assert "self.flat1(parts[1])" in code and "# B x 1 x 4, B x 2 x 4" in code
    model = load_generated(tmp_path / "model.py").load()
    x = source.example(4, seed=1)
    with torch.inference_mode():
        assert torch.equal(model(x), source.reference(x))
    onnx = export(source, "onnx", tmp_path / "split.onnx", ExportOptions(timing_runs=1))
    assert onnx.ok, onnx.to_text()
    assert onnx.metrics["max_abs_diff"] < 1e-5


def test_a_chunk_torch_cuts_into_fewer_parts_imports_as_the_split_it_is():
    class Uneven(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            a, b, c = x.chunk(4, dim=1)  # 5 values: parts of 2, 2, 1
            return torch.cat([c, a, b], dim=1)

    result = import_module(Uneven(), (5,))
    assert [(n.type, n.params) for n in result.graph if n.type in ("Split", "Chunk")] == [
        ("Split", {"sizes": [2, 2, 1], "dim": 1})]
    x = torch.randn(3, 5)
    assert torch.equal(build_module(result.graph)(x), Uneven()(x))
