"""Networks as people write them import exactly (issue 23): sizes read in Python (``x.view(len(x), -1)``,
``int(x.size(1) * r)``, ``if`` on a size), tuple outputs, ``forward(x, mask=None)``, ``.cuda()`` in a
factory. What fx cannot trace is captured with torch.export; what torch.export cannot capture either
is one paragraph: the module, the line, the reason and what to change."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from exporters import ExportOptions, export
from exporters.source import ExportSource, random_inputs
from graph_editor.analysis import analyze
from graph_editor.building import build_module
from graph_editor.importer import ModuleImportError, import_module
from graph_editor.importer.factory import import_factory
from tests.graph_editor import user_code_models as U

CASES = {"len_view": (U.LenView, (3, 8, 8)), "ratio": (U.Ratio, (10,)), "aux_head": (U.AuxHead, (3, 2, 2)),
         "len_view_aux": (U.LenViewAux, (3, 8, 8)),
         "masked_tokens": (U.Tokens, (5, 4)), "len_view_cumsum": (U.LenViewCumsum, (3, 8, 8)),
         "cumsum_tokens": (U.CumsumTokens, (5, 4))}


def _exact(net: nn.Module, shape: tuple[int, ...]):
    """Import ``net`` and check what the import walk checks: parameters, FLOPs and outputs."""
    torch.manual_seed(0)
    net = net.eval()
    result = import_module(net, shape)
    module = build_module(result.graph).eval()
    module.load_state_dict(result.state_dict)
    stats = analyze(result.graph, batch=2)
    assert stats.total_params == sum(p.numel() for p in net.parameters())
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        net(torch.randn(2, *shape))
    assert stats.total_flops == counter.get_total_flops()
    x = torch.randn(5, *shape)
    with torch.no_grad():
        want = net(x)
        want = want[0] if isinstance(want, tuple) else want
        got = module(x)
    assert (got - want).abs().max() <= 1e-5 * want.abs().max()
    return result


@pytest.mark.parametrize("case", CASES)
def test_user_code_imports_exactly(case):
    cls, shape = CASES[case]
    result = _exact(cls(), shape)
    types = {n.id: n.type for n in result.graph}
    if case in ("len_view", "ratio", "len_view_aux", "masked_tokens"):
        # fx cannot trace them (len(x), if on a size) or one of their ops as written does not map (a division
        # by q.size(-1) ** 0.5): their exported programs' ATen ops do, every node named after its module
        assert "Program" not in types.values(), types
    if case == "len_view":
        assert list(types.values()) == ["Input", "Conv2d", "BatchNorm2d", "ReLU", "MaxPool2d", "Flatten", "Linear",
                                        "Output"]
        assert {"conv", "bn", "fc"} <= set(types)
    if case == "masked_tokens":
        assert types["block_qkv"] == "Linear" and types["block_matmul"] == "MatMul" and types["norm"] == "LayerNorm"
    if case == "cumsum_tokens":  # only the block with the running sum is kept whole; the rest is catalog layers
        assert types["block"] == "Program" and types["embed"] == "Linear" and types["norm"] == "LayerNorm"
    if case == "aux_head":  # fx traces it: catalog layers only, the first output the graph's
        assert "Program" not in types.values()
    if case in ("aux_head", "len_view_aux"):  # the graph reads the first output; the aux head stays unread
        assert [e.src for e in result.graph.edges if e.dst == "output"] == ["head" if case == "aux_head" else "fc"]
    if case == "len_view_cumsum":  # one program, two output ports; the graph reads the first
        (program,) = [n for n in result.graph if n.type == "Program"]
        assert json.loads(program.params["out_shapes"]) == [[10], [128]]
        assert [(e.src, e.src_port) for e in result.graph.edges if e.dst == "output"] == [(program.id, "out")]


def test_a_factory_that_calls_cuda_imports_on_a_machine_without_one():
    if torch.cuda.is_available():
        pytest.skip("the CUDA machine runs .cuda() for real")
    methods = nn.Module.cuda, torch.Tensor.cuda
    result = import_factory("tests.graph_editor.user_code_models:cuda_factory", (3, 8, 8))
    assert [n.type for n in result.graph] == ["Input", "Program", "Output"]  # len(x): fx cannot trace it
    assert (nn.Module.cuda, torch.Tensor.cuda) == methods  # put back: .cuda() fails here as before


def test_what_torch_export_cannot_capture_is_named_with_its_line_and_what_to_change():
    class Branchy(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if x.sum() > 0:
                return x
            return -x

    with pytest.raises(ModuleImportError) as info:
        import_module(Branchy(), (3,))
    message = str(info.value)
    assert "torch.export cannot capture Branchy at test_import_user_code.py:" in message
    assert "`if x.sum() > 0:`" in message and "torch.where or torch.cond" in message


def test_a_program_that_fixes_the_batch_says_what_dynamo_said_too():
    """len(x) fixes the batch size where Python runs the module; dynamo is tried for that, and what stopped
    it is said (CI once failed on len_view_cumsum saying only the first)."""
    class LenThenBreak(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            torch._dynamo.graph_break()
            return x.view(len(x), -1)

    with pytest.raises(ModuleImportError) as info:
        import_module(LenThenBreak(), (3,))
    message = str(info.value)
    assert "torch.export cannot capture LenThenBreak (its program fixes the batch size at 2); under dynamo: " in message
    assert "graph_break" in message.split("under dynamo: ")[1]


@pytest.mark.export
def test_a_whole_model_program_exports_to_onnx_with_parity(tmp_path):
    result = _exact(U.LenViewCumsum(), (3, 8, 8))
    assert [n.type for n in result.graph] == ["Input", "Program", "Output"]
    module = build_module(result.graph).eval()
    module.load_state_dict(result.state_dict)
    source = ExportSource(result.graph, module, random_inputs(result.graph, 3), "lenview", "imported LenView")
    report = export(source, "onnx", tmp_path / "lenview.onnx", ExportOptions(timing_runs=1))
    assert report.ok, report.to_text()
