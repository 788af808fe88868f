"""The Program node (issue 23): what the importer cannot map is kept as the submodule's own exported
program and weights, and still builds, counts, trains, saves, exports and writes as source. Nothing is
rebuilt from constructor arguments, so classes no import can find, and modules that keep no attribute
for their arguments, import the same way."""

from __future__ import annotations

import json

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from exporters import ExportOptions, export
from exporters.source import ExportSource, random_inputs
from graph_editor.analysis import analyze
from graph_editor.building import BuildError, build_module
from graph_editor.importer import ModuleImportError, import_module
from graph_editor.model import load_graph, save_graph, validate
from studio import cli
from tests.graph_editor.module_node_models import (
    AuxHead,
    Positions,
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


def test_an_unmappable_op_keeps_its_smallest_enclosing_module_as_its_program(imported):
    _, result = imported
    types = {n.id: n.type for n in result.graph}
    assert types["block"] == "Program" and types["stem"] == "Conv2d" and types["head"] == "Linear"
    params = result.graph.nodes["block"].params
    assert params["source"] == "block (SineBlock)"
    assert json.loads(params["in_shapes"]) == [[8, 8, 8]] and json.loads(params["out_shapes"]) == [[8, 8, 8]]
    assert {k for k in result.state_dict if k.startswith("block.")} == {"block.program.inner.conv.weight",
                                                                        "block.program.inner.conv.bias"}


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


def test_it_runs_at_batch_one_and_trains_a_step(imported):
    _, result = imported
    module = built(result).train()
    assert module(torch.randn(1, *SHAPE)).shape == (1, 4)  # captured at batch 2, its batch is free
    block = dict(module.get_submodule("block").named_parameters())
    before = block["program.inner.conv.weight"].detach().clone()
    opt = torch.optim.SGD(module.parameters(), lr=0.1)
    loss = torch.nn.functional.cross_entropy(module(torch.randn(4, *SHAPE)), torch.tensor([0, 1, 2, 3]))
    loss.backward()
    opt.step()
    assert torch.isfinite(loss) and not torch.equal(block["program.inner.conv.weight"], before)


def test_memory_prediction_and_autograd_capture_see_inside_it(imported):
    """Run under fake tensors like any node: its conv's backward and weights are the node's."""
    from graph_editor.autograd.capture import capture_autograd
    from trainer.memory.prediction import predict_memory

    capture = capture_autograd(imported[1].graph, batch=2)
    mine = [n for n in capture.nodes if n.owner == "block"]
    assert "ConvolutionBackward0" in {n.name for n in mine}
    assert {n.param for n in mine if n.param} == {"block.program.inner.conv.weight", "block.program.inner.conv.bias"}
    memory = predict_memory(imported[1].graph, 4)
    assert memory.nodes["block"]["weights"] == (8 * 8 * 9 + 8) * 4


def test_it_saves_loads_and_refuses_a_damaged_program(imported, tmp_path):
    _, result = imported
    path = tmp_path / "net.graph.json"
    save_graph(result.graph, path)
    again = load_graph(path)
    assert again.nodes["block"].params == result.graph.nodes["block"].params
    assert validate(again, 2).shapes["block"] == (2, 8, 8, 8)
    raw = json.loads(path.read_text())
    node = next(n for n in raw["nodes"] if n["id"] == "block")
    text = node["params"]["program"]
    node["params"]["program"] = text[:100] + ("A" if text[100] != "A" else "B") + text[101:]
    path.write_text(json.dumps(raw))
    with pytest.raises(BuildError) as info:
        analyze(load_graph(path))
    assert "block" in str(info.value) and "does not match its sha256" in str(info.value)


def test_its_recorded_shape_is_checked(imported):
    graph = imported[1].graph.copy()
    graph.nodes["block"].params["in_shapes"] = "[[8, 4, 4]]"
    problems = [str(p) for p in validate(graph, 2).problems]
    assert any("block" in p and "input 0 was captured as 8x4x4, receives 8x8x8" in p for p in problems), problems


@pytest.mark.export
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
    assert "from graph_editor.building.ops.program import ExportedProgramModule" in text
    assert "class ExportedProgramModule" not in text


def test_the_import_leaves_every_submodule_in_its_mode():
    """Capturing a block runs it in eval mode; afterwards each submodule is as it was (a block left in
    training mode made BatchNorm update its statistics in the user's own model)."""
    net = sine_net().eval()
    net.head.train()
    import_module(net, SHAPE)
    assert [name for name, m in net.named_modules() if m.training] == ["head"]


def test_a_program_that_makes_tensors_runs_on_meta_and_counts():
    """aten.arange(..., device=cpu) in the captured graph follows the inputs' device (meta for analysis)."""
    torch.manual_seed(0)
    net = Positions().eval()
    result = import_module(net, (6,))
    assert [n.type for n in result.graph] == ["Input", "Program", "Output"]
    stats = analyze(result.graph, batch=1)
    assert stats.total_flops == 2 * 6 * 3 and stats.total_params == 6 * 3 + 3
    x = torch.randn(4, 6)
    with torch.no_grad():
        assert torch.equal(built(result).eval()(x), net(x))


def test_a_weight_shared_by_two_calls_is_one_weight():
    """One layer under two names, called twice (CoaT shares its position encodings so): one tensor,
    counted and trained once, as in the module."""
    class Twice(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)
            self.again = self.fc

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.again(torch.sin(self.fc(x)))

    torch.manual_seed(0)
    net = Twice().eval()
    result = import_module(net, (4,))
    assert [n.type for n in result.graph] == ["Input", "Program", "Output"]
    assert analyze(result.graph, batch=1).total_params == 20
    module = built(result).eval()
    assert sum(p.numel() for p in module.parameters()) == 20
    x = torch.randn(3, 4)
    with torch.no_grad():
        assert torch.equal(module(x), net(x))


def test_strict_keeps_the_error():
    with pytest.raises(ModuleImportError) as info:
        import_module(sine_net(), SHAPE, strict=True)
    assert {u.node for u in info.value.unsupported} >= {"sin"}


def test_a_class_no_import_can_find_imports_all_the_same():
    """Defined in a function: a Module node could not name it; its program needs no name."""
    class Hidden(SineBlock):
        pass

    torch.manual_seed(0)
    net = sine_net().eval()
    net.block = Hidden(8, scale=0.5).eval()
    result = import_module(net, SHAPE)
    assert result.graph.nodes["block"].params["source"] == "block (Hidden)"
    x = torch.randn(3, *SHAPE)
    with torch.no_grad():
        assert torch.equal(built(result).eval()(x), net(x))


@pytest.mark.process
def test_the_cli_import_flag(tmp_path, capsys):
    out = tmp_path / "net.graph.json"
    args = ["import", "tests.graph_editor.module_node_models:sine_net", "--input-shape", "3,8,8", "-o", str(out)]
    assert cli.main(args) == 0
    assert load_graph(out).nodes["block"].type == "Program"
    with pytest.raises(SystemExit) as info:
        cli.main([*args, "--strict"])
    assert info.value.code == 1 and "sin (torch.sin)" in capsys.readouterr().err


@pytest.mark.process
def test_the_worker_trains_a_graph_with_a_program_node(tmp_path):
    """The real worker process loads the node's program from the graph, trains it on the digits and finishes."""
    graph = import_module(digits_sine_net(), (1, 8, 8)).graph
    assert graph.nodes["block"].type == "Program"
    code, events, stderr = run_worker(write_spec(tmp_path, graph), f"sqlite:///{tmp_path / 'runs.sqlite'}")
    assert code == 0, stderr
    assert "finished" in kinds(events) and "failed" not in kinds(events)


def test_a_module_returning_a_tuple_is_one_node_with_an_output_port_each():
    """A Program node gives each tensor of a tuple on its own port; the users read the ones they take."""
    torch.manual_seed(0)
    net = AuxHead().eval()
    result = import_module(net, (3, 2, 2))
    assert result.graph.nodes["body"].type == "Program"
    assert json.loads(result.graph.nodes["body"].params["out_shapes"]) == [[16], [12]]
    assert {e.src_port for e in result.graph.edges if e.src == "body"} == {"out", "out1"}
    x = torch.randn(4, 3, 2, 2)
    with torch.no_grad():
        assert torch.equal(built(result).eval()(x), net(x)[0])


@pytest.mark.slow
def test_an_output_that_does_not_lead_with_the_batch_widens_to_the_module_around_it(monkeypatch):
    """nn.RNN's hidden state is [layers, batch, features]: its block, which returns the sequence, is kept,
    and the RNN is never captured (a capture costs seconds: sequencer2d_s captured its 36 LSTMs, whose hidden
    states are the same, before widening to their 18 blocks). The whole model is captured once first, for
    its ATen ops (aten.rnn_tanh maps to no layer)."""
    from graph_editor.importer import capture as import_capture

    captured: list[str] = []
    capture = import_capture.capture
    monkeypatch.setattr(import_capture, "capture", lambda m, xs, what: captured.append(what) or capture(m, xs, what))
    torch.manual_seed(0)
    net = SequenceNet().eval()
    result = import_module(net, (5, 6))
    assert [n.params["source"] for n in result.graph if n.type == "Program"] == ["block (RecurrentBlock)"]
    assert captured == ["SequenceNet", "block (RecurrentBlock)"]
    x = torch.randn(4, 5, 6)
    with torch.no_grad():
        assert torch.equal(built(result).eval()(x), net(x))


@pytest.mark.parametrize("block", [None, TwoWidthsBlock(8, 2, 1, 1)], ids=["one", "three"])
def test_a_module_that_keeps_no_attribute_for_its_arguments_imports(block):
    """torchvision's ShiftedWindowAttention keeps no ``dim``; no argument is guessed, however many."""
    torch.manual_seed(0)
    net = WidthlessNet().eval()
    if block is not None:
        net.block = block.eval()
    result = import_module(net, (5, 6))
    assert result.graph.nodes["block"].type == "Program"
    x = torch.randn(4, 5, 6)
    with torch.no_grad():
        assert torch.equal(built(result).eval()(x), net(x))


def test_norms_without_bias_import_as_norms_without_bias():
    """timm's poolformerv2 normalises with GroupNorm(1, C, bias=False) and LayerNorm(bias=False): the catalog's
    norms once always had a bias (poolformerv2_s12: 6,656 parameters too many), then were kept whole as Program
    nodes; now their ``bias`` option is off, parameters exact, outputs the same."""
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 1), torch.nn.GroupNorm(1, 8, bias=False), torch.nn.Flatten(),
                              torch.nn.LayerNorm(8 * 8 * 8, bias=False), torch.nn.Linear(8 * 8 * 8, 4)).eval()
    result = import_module(net, SHAPE, strict=True)
    norms = {n.type: n.params["bias"] for n in result.graph if n.type in ("GroupNorm", "LayerNorm")}
    assert norms == {"GroupNorm": False, "LayerNorm": False}
    assert analyze(result.graph, batch=1).total_params == sum(p.numel() for p in net.parameters())
    x = torch.randn(4, *SHAPE)
    with torch.no_grad():
        assert torch.equal(built(result).eval()(x), net(x))
