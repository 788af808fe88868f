"""timm's layers that kept families from importing strictly (issue 23): RMS norms (RmsNorm, RmsNorm2d, SimpleNorm,
SimpleNorm2d: ConvNeXt-RMS, MobileNetV5), weights standardised in forward (StdConv2d, ScaledStdConv2d: NF-Nets, BiT),
'SAME' max pooling with -inf padding (PNASNet, NASNet), BlurPool2d's fixed filter (TResNet), AvgPool1d (Next-ViT),
a tiled parameter (SAM2 Hiera), a crop by negative padding, branches stacked and averaged across the batch dim
(CrossViT) and an antialiased resize (NaFlexViT). Small modules of them import strictly, by fx and by the exported
program's ops, and are the module at every batch, with FlopCounterMode's FLOPs; the standardised convolution trains
as timm's does; the ONNX export agrees with onnxruntime."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from exporters import ExportOptions, export
from exporters.source import ExportSource, random_inputs
from graph_editor.analysis import analyze
from graph_editor.building import build_module
from graph_editor.importer import import_module
from graph_editor.model import Graph, InputSpec, validate

layers = pytest.importorskip("timm.layers")
MaxPool2dSame = pytest.importorskip("timm.layers.pool2d_same").MaxPool2dSame


class Traceable(nn.Module):
    """The layers fx traces through (each a leaf that a rule reads)."""

    def __init__(self) -> None:
        super().__init__()
        self.rms2d, self.simple2d = layers.RmsNorm2d(4), layers.SimpleNorm2d(4)
        self.conv = layers.StdConv2d(4, 6, 3, padding=1)
        self.scaled = layers.ScaledStdConv2d(6, 6, 3, stride=2, gamma=1.7)
        self.pool = MaxPool2dSame(3, 2)  # 'SAME': -inf padding computed from the input in forward
        self.blur = layers.BlurPool2d(6, filt_size=3, stride=2)
        self.crop = nn.ZeroPad2d((-1, 1, -1, 1))
        self.window = nn.Parameter(torch.randn(1, 6, 1, 2))
        self.tokens = nn.AvgPool1d(2, 2)
        self.rms, self.simple = layers.RmsNorm(6), layers.SimpleNorm(6)
        self.heads = nn.ModuleList([nn.Linear(6, 3), nn.Linear(6, 3)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.scaled(self.conv(self.simple2d(self.rms2d(x))))  # 9x9 -> 5x5
        x = self.crop(self.blur(self.pool(x))) + self.window.tile((2, 1))  # 3x3 -> 2x2
        x = self.tokens(x.flatten(2)).transpose(1, 2)  # 4 tokens -> 2
        x = self.simple(self.rms(x)).mean(1)
        return torch.mean(torch.stack([head(x) for head in self.heads], dim=0), dim=0)


class Exported(nn.Module):
    """The same layers where fx cannot follow (an ``if`` on a size): the exported program's ATen ops, an RMS norm
    fused with its activation, a convolution padded 'SAME' by the input's size, a norm without weights and a
    position embedding resized with antialiasing."""

    def __init__(self) -> None:
        super().__init__()
        self.norm_act = layers.RmsNormAct2d(4)
        self.simple2d = layers.SimpleNorm2d(4)
        self.conv = layers.StdConv2dSame(4, 6, 3, stride=2)
        self.scaled = layers.ScaledStdConv2d(6, 6, 1, gamma=1.7)
        self.pool = MaxPool2dSame(3, 2)
        self.pos = nn.Parameter(torch.randn(1, 6, 5, 5))
        self.ln, self.rms = nn.LayerNorm(6, elementwise_affine=False), layers.RmsNorm(6)
        self.head = nn.Linear(6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] % 2 == 0:
            raise ValueError("an odd width")
        x = self.pool(self.scaled(self.conv(self.simple2d(self.norm_act(x)))))  # 9x9 -> 5x5 -> 3x3
        x = x + F.interpolate(self.pos, size=(3, 3), mode="bilinear", antialias=True)
        return self.head(self.rms(self.ln(x.flatten(2).transpose(1, 2))).mean(1))


def _redrawn(module: nn.Module) -> nn.Module:
    """Weights away from their initial ones (norm weights of 1, gains of 1 would hide a weight left out)."""
    torch.manual_seed(0)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(torch.randn_like(p) * 0.2)
    return module.eval()


def _is_the_module(module: nn.Module, shape: tuple[int, ...]) -> dict[str, int]:
    result = import_module(module, shape, strict=True)
    built = build_module(result.graph).eval()
    built.load_state_dict(result.state_dict)
    for batch in (1, 3):
        x = torch.randn(batch, *shape, generator=torch.Generator().manual_seed(batch))
        with torch.no_grad():
            torch.testing.assert_close(built(x), module(x), rtol=1e-5, atol=1e-6)
    stats = analyze(result.graph, batch=1)
    with FlopCounterMode(display=False) as counter:  # on meta, as the analysis counts (CPU's SDPA kernels count none)
        copy.deepcopy(module).to("meta")(torch.empty(1, *shape, device="meta"))
    assert stats.total_flops == counter.get_total_flops()
    assert stats.total_params == sum(p.numel() for p in module.parameters())
    types: dict[str, int] = {}
    for n in result.graph:
        types[n.type] = types.get(n.type, 0) + 1
    return types


@pytest.mark.slow  # seconds of CPU: make test runs it, make test-fast does not
def test_timm_s_norms_convs_and_pools_import_strictly_by_fx():
    module = _redrawn(Traceable())
    types = _is_the_module(module, (4, 9, 9))
    assert types["RMSNorm2d"] == 2 and types["RMSNorm"] == 2 and types["StdConv2d"] == 2
    assert types["MaxPool2d"] == types["BlurPool2d"] == types["AvgPool1d"] == 1
    # SAM2 Hiera's tiled parameter is computed from the parameter alone: the Computed fold takes it (as a node that
    # trains the parameter); the Tile layer's own rule is proven on a tiled input in the catalog's round trips
    assert types["Computed"] == 1 and "Tile" not in types
    assert types["Pad"] == 1 and "Stack" not in types and "Program" not in types  # the stack's mean: its parts summed


@pytest.mark.slow  # seconds of CPU: make test runs it, make test-fast does not
def test_their_exported_program_ops_import_strictly_as_the_same_layers():
    module = _redrawn(Exported())
    types = _is_the_module(module, (4, 9, 9))
    # SimpleNorm2d's program permutes to channels last and back: an RMSNorm over the channels between Permutes
    assert types["RMSNorm2d"] == 1 and types["RMSNorm"] == 2 and types["StdConv2d"] == 2
    assert types["MaxPool2d"] == types["LayerNorm"] == types["Interpolate"] == 1
    assert types["Pad"] == 1  # StdConv2dSame's padding at the import's shape


class MultiQuery(nn.Module):
    """MobileNetV5's multi-query attention: one head of keys and values for all the queries' heads."""

    def __init__(self) -> None:
        super().__init__()
        self.q, self.kv, self.head = nn.Linear(8, 8), nn.Linear(8, 4), nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, N, _ = x.shape
        q = self.q(x).reshape(B, N, 4, 2).transpose(1, 2)  # [B, 4 heads, N, 2]
        k, v = self.kv(x).reshape(B, N, 1, 4).transpose(1, 2).chunk(2, dim=-1)  # [B, 1 head, N, 2] each
        y = F.scaled_dot_product_attention(q, k, v)
        return self.head(y.transpose(1, 2).reshape(B, N, 8).mean(1))


@pytest.mark.slow  # seconds of CPU: make test runs it, make test-fast does not
def test_keys_and_values_of_one_head_for_all_queries_import_strictly():
    types = _is_the_module(_redrawn(MultiQuery()), (5, 8))
    assert types["ScaledDotProductAttention"] == 1


@pytest.mark.slow  # seconds of CPU: make test runs it, make test-fast does not
def test_a_standardised_convolution_trains_as_timm_s_does():
    """Its gradients reach the raw weights (and the gain) through the standardisation, as timm's."""
    timm_conv = _redrawn(nn.Sequential(layers.ScaledStdConv2d(3, 4, 3, gamma=1.7), nn.Flatten()))
    result = import_module(timm_conv, (3, 6, 6), strict=True)
    built = build_module(result.graph)
    built.load_state_dict(result.state_dict)
    x = torch.randn(2, 3, 6, 6)
    timm_conv(x).square().sum().backward()
    built(x).square().sum().backward()
    grads = {k.split(".", 1)[1]: p.grad for k, p in built.named_parameters()}
    assert sorted(grads) == ["bias", "gain", "weight"]
    for name, p in timm_conv[0].named_parameters():
        torch.testing.assert_close(grads[name], p.grad, rtol=1e-4, atol=1e-6)


def test_the_new_layers_shape_rules_name_what_is_wrong():
    g = Graph(InputSpec((3, 4, 4)), 3)
    g.add_node("Input", "input")
    for node_id, type_, params in [("pool", "MaxPool2d", {"kernel_size": 3, "padding": 1, "same": True}),
                                   ("crop", "Pad", {"pad": [-1, 0], "mode": "reflect"}),
                                   ("gone", "Pad", {"pad": [-2, -2]}),
                                   ("tile", "Tile", {"reps": [1, 2, 2, 2]}),
                                   ("blur", "BlurPool2d", {"filt_size": 9}),
                                   ("resize", "Interpolate", {"mode": "nearest", "antialias": True})]:
        g.add_node(type_, node_id, params)
        g.connect("input", node_id)
    problems = {p.node: p.message for p in validate(g, batch=2).problems}
    assert "padding must be 0 with same" in problems["pool"]
    assert "reflect padding cannot crop: pad [-1, 0] has a negative amount" in problems["crop"]
    assert "pad [-2, -2] crops all of dim 3 (size 4)" in problems["gone"]
    assert "reps [1, 2, 2, 2] must name 1 to 3 trailing dims" in problems["tile"]
    assert "reflect padding 4 needs an input larger than 4" in problems["blur"]
    assert "antialias needs mode bilinear or bicubic" in problems["resize"]
    g = Graph(InputSpec((4, 5, 2)), 3)
    g.add_node("Input", "input")
    g.add_node("Reshape", "k", {"shape": [2, 10, 2]})
    g.add_node("ScaledDotProductAttention", "sdpa")
    for src, port in (("input", "q"), ("k", "k"), ("k", "v")):
        g.connect(src, "sdpa", dst_port=port)
    g.connect("input", "k")
    problems = {p.node: p.message for p in validate(g, batch=2).problems}
    assert "keys and values may have 1 where queries have more): q 4x5x2, k 2x10x2" in problems["sdpa"]


@pytest.mark.export
def test_they_export_to_onnx_and_to_a_standalone_model_py(tmp_path):
    result = import_module(_redrawn(Traceable()), (4, 9, 9), strict=True)
    built = build_module(result.graph).eval()
    built.load_state_dict(result.state_dict)
    source = ExportSource(result.graph, built, random_inputs(result.graph, 3), "timm_layers", "imported layers")
    report = export(source, "onnx", tmp_path / "timm_layers.onnx", ExportOptions(timing_runs=1))
    assert report.ok, report.to_text()
    assert report.metrics["max_abs_diff"] < 1e-4
    python = export(source, "python", tmp_path / "model.py", ExportOptions(timing_runs=1))
    assert python.ok, python.to_text()  # the classes copied in, torch alone, outputs bit-identical
    assert "graph_editor" not in (tmp_path / "model.py").read_text()
