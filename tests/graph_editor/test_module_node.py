"""The opaque Module node (issue 16): what the importer cannot map is kept whole, and still builds,
counts, trains, saves, exports and writes as source."""

from __future__ import annotations

import json

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from exporters import ExportOptions, export
from exporters.source import ExportSource, random_inputs
from graph_editor.build import BuildError, ModuleImportError, analyze, build_module, import_module
from graph_editor.model import load_graph, save_graph, validate
from studio import cli
from tests.graph_editor.module_node_models import (
    SequenceNet,
    SineBlock,
    TwoWidthsBlock,
    WidthlessNet,
    digits_sine_net,
    sine_net,
)
from tests.trainer.helpers import kinds, run_worker, write_spec

SHAPE = (3, 8, 8)


@pytest.fixture(scope="module")
def imported():
    net = sine_net().eval()
    return net, import_module(net, SHAPE)


def built(result) -> torch.fx.GraphModule:
    module = build_module(result.graph)
    module.load_state_dict(result.state_dict)  # strict: every weight found its node
    return module


def test_an_unmappable_op_keeps_its_smallest_enclosing_module_whole(imported):
    _, result = imported
    types = {n.id: n.type for n in result.graph}
    assert types["block"] == "Module" and types["stem"] == "Conv2d" and types["head"] == "Linear"
    params = result.graph.nodes["block"].params
    assert params["cls"] == "tests.graph_editor.module_node_models:SineBlock"
    assert json.loads(params["kwargs"]) == {"channels": 8, "scale": 0.5}  # read back from the attributes
    assert params["in_shape"] == [8, 8, 8] and params["out_shape"] == [8, 8, 8]
    assert {k for k in result.state_dict if k.startswith("block.")} == {"block.conv.weight", "block.conv.bias"}


def test_it_builds_back_to_identical_outputs_and_counts_like_pytorch(imported):
    net, result = imported
    module = built(result).eval()
    x = torch.randn(5, *SHAPE)
    with torch.no_grad():
        assert torch.equal(module(x), net(x))
    stats = analyze(result.graph, batch=2)
    assert stats.by_id()["block"].shape == (2, 8, 8, 8)
    assert stats.total_params == sum(p.numel() for p in net.parameters())
    with FlopCounterMode(display=False) as counter:
        net.to("meta")(torch.empty(2, *SHAPE, device="meta"))
    assert stats.total_flops == counter.get_total_flops()
    assert stats.by_id()["block"].flops == 2 * 2 * 8 * 8 * 8 * 8 * 9  # its conv: 2 FLOPs per multiply-add


def test_it_trains_a_step(imported):
    _, result = imported
    module = built(result).train()
    before = module.get_submodule("block").conv.weight.detach().clone()
    opt = torch.optim.SGD(module.parameters(), lr=0.1)
    loss = torch.nn.functional.cross_entropy(module(torch.randn(4, *SHAPE)), torch.tensor([0, 1, 2, 3]))
    loss.backward()
    opt.step()
    assert torch.isfinite(loss) and not torch.equal(module.get_submodule("block").conv.weight, before)


def test_it_saves_loads_and_names_a_class_that_cannot_be_imported(imported, tmp_path):
    _, result = imported
    path = tmp_path / "net.graph.json"
    save_graph(result.graph, path)
    again = load_graph(path)
    assert again.nodes["block"].params == result.graph.nodes["block"].params
    assert validate(again, 2).shapes["block"] == (2, 8, 8, 8)
    raw = json.loads(path.read_text())
    node = next(n for n in raw["nodes"] if n["id"] == "block")
    node["params"]["cls"] = "tests.graph_editor.no_such_module:SineBlock"
    path.write_text(json.dumps(raw))
    with pytest.raises(BuildError) as info:
        analyze(load_graph(path))
    assert "block" in str(info.value) and "tests.graph_editor.no_such_module:SineBlock" in str(info.value)


def test_its_recorded_shape_is_checked(imported):
    graph = imported[1].graph.copy()
    graph.nodes["block"].params["in_shape"] = [8, 4, 4]
    problems = [str(p) for p in validate(graph, 2).problems]
    assert any("block" in p and "imported for input 8x4x4, receives 8x8x8" in p for p in problems), problems


def test_it_exports_to_onnx_and_to_source_with_parity(imported, tmp_path):
    _, result = imported
    module = built(result).eval()
    source = ExportSource(result.graph, module, random_inputs(result.graph, 3), "sine", "imported SineNet")
    onnx = export(source, "onnx", tmp_path / "sine.onnx", ExportOptions(timing_runs=1))
    assert onnx.ok, onnx.to_text()
    assert onnx.metrics["max_abs_diff"] < 1e-4
    py = export(source, "python", tmp_path / "sine.py")
    assert py.ok, py.to_text()
    text = (tmp_path / "sine.py").read_text()
    assert "from tests.graph_editor.module_node_models import SineBlock" in text
    assert "SineBlock(channels=8, scale=0.5)" in text


def test_strict_keeps_the_error():
    with pytest.raises(ModuleImportError) as info:
        import_module(sine_net(), SHAPE, strict=True)
    assert {u.node for u in info.value.unsupported} >= {"sin"}


def test_a_module_that_cannot_be_constructed_again_is_refused_naming_the_argument():
    class Hidden(SineBlock):  # defined in a function: no import can find it
        pass

    net = sine_net()
    net.block = Hidden(8)
    with pytest.raises(ModuleImportError, match="<locals>"):
        import_module(net, SHAPE)


def test_the_cli_import_flag(tmp_path, capsys):
    out = tmp_path / "net.graph.json"
    args = ["import", "tests.graph_editor.module_node_models:sine_net", "--input-shape", "3,8,8", "-o", str(out)]
    assert cli.main(args) == 0
    assert load_graph(out).nodes["block"].type == "Module"
    with pytest.raises(SystemExit) as info:
        cli.main([*args, "--strict"])
    assert info.value.code == 1 and "sin (torch.sin)" in capsys.readouterr().err


@pytest.mark.process
def test_the_worker_trains_a_graph_with_a_module_node(tmp_path):
    """The real worker process imports the node's class by name, trains it on the digits and finishes."""
    graph = import_module(digits_sine_net(), (1, 8, 8)).graph
    assert graph.nodes["block"].type == "Module"
    code, events, stderr = run_worker(write_spec(tmp_path, graph), f"sqlite:///{tmp_path / 'runs.sqlite'}")
    assert code == 0, stderr
    assert "finished" in kinds(events) and "failed" not in kinds(events)


def test_a_leaf_that_cannot_be_a_module_node_widens_to_the_module_around_it():
    """nn.GRU returns a tuple (one tensor out is what a node gives): its block, which takes [0], is kept."""
    torch.manual_seed(0)
    net = SequenceNet().eval()
    result = import_module(net, (5, 6))
    node = result.graph.nodes["block"]
    assert node.type == "Module" and node.params["cls"] == "tests.graph_editor.module_node_models:RecurrentBlock"
    assert json.loads(node.params["kwargs"]) == {"features": 8}
    assert [n.type for n in result.graph if n.id != "block"].count("Module") == 0
    x = torch.randn(4, 5, 6)
    with torch.no_grad():
        assert torch.equal(built(result).eval()(x), net(x))


def test_a_width_the_module_keeps_no_attribute_for_is_found_among_its_weights_sizes():
    """torchvision's ShiftedWindowAttention keeps no ``dim``: the width that rebuilds the same weights is found."""
    torch.manual_seed(0)
    net = WidthlessNet().eval()
    result = import_module(net, (5, 6))
    node = result.graph.nodes["block"]
    assert node.type == "Module" and json.loads(node.params["kwargs"]) == {"heads": 2, "width": 8}
    x = torch.randn(4, 5, 6)
    with torch.no_grad():
        assert torch.equal(built(result).eval()(x), net(x))


def test_too_many_unrecoverable_arguments_are_refused_naming_the_first():
    net = WidthlessNet()
    net.block = TwoWidthsBlock(8, 2, 1, 1)
    with pytest.raises(ModuleImportError, match="cannot recover argument 'width' of TwoWidthsBlock.*3 arguments"):
        import_module(net, (5, 6))
