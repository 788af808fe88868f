"""Weights computed from parameters in forward (issue 23): SwinV2's ``clamp(logit_scale).exp()`` and its continuous
position bias (an MLP over a fixed coordinates table, gathered), BEiT's qkv bias ``cat((q_bias, zeros, v_bias))``.
A small block written as timm writes them imports strictly, each such value one Computed node holding its
parameters; the graph is the module at every batch, its FLOPs FlopCounterMode's, training reaches those
parameters, and its ONNX export agrees with onnxruntime."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from exporters import ExportOptions, export
from exporters.source import ExportSource, random_inputs
from graph_editor.analysis import analyze
from graph_editor.building import build_module
from graph_editor.building.ops.computed import Recipe, encode_recipe
from graph_editor.importer import import_module
from graph_editor.model import Graph, InputSpec


class CosineWindowAttention(nn.Module):
    """SwinV2's attention on 2x2 windows (folded into the batch), written as timm writes it."""

    def __init__(self, c: int = 8, heads: int = 2, ws: int = 2) -> None:
        super().__init__()
        self.heads, self.ws = heads, ws
        self.qkv = nn.Linear(c, 3 * c, bias=False)
        self.q_bias, self.v_bias = nn.Parameter(torch.randn(c)), nn.Parameter(torch.randn(c))
        self.logit_scale = nn.Parameter(torch.log(10 * torch.rand(heads, 1, 1) + 1))
        self.cpb_mlp = nn.Sequential(nn.Linear(2, 16), nn.ReLU(inplace=True), nn.Linear(16, heads, bias=False))
        h = torch.arange(-(ws - 1), ws, dtype=torch.float32)
        table = torch.stack(torch.meshgrid(h, h, indexing="ij")).permute(1, 2, 0).unsqueeze(0)
        self.register_buffer("coords_table", torch.sign(table) * torch.log2(table.abs() + 1.0) / math.log2(8))
        coords = torch.stack(torch.meshgrid(torch.arange(ws), torch.arange(ws), indexing="ij")).flatten(1)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + ws - 1
        self.register_buffer("index", rel[..., 0] * (2 * ws - 1) + rel[..., 1])
        self.proj, self.head = nn.Linear(c, c), nn.Linear(c, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [B, 4, 4, C]
        B, H, W, C = x.shape
        w = x.view(B, H // self.ws, self.ws, W // self.ws, self.ws, C).permute(0, 1, 3, 2, 4, 5)
        w = w.reshape(-1, self.ws * self.ws, C)
        B_, N, _ = w.shape
        qkv_bias = torch.cat((self.q_bias, torch.zeros_like(self.v_bias, requires_grad=False), self.v_bias))
        qkv = F.linear(w, weight=self.qkv.weight, bias=qkv_bias)
        q, k, v = qkv.reshape(B_, N, 3, self.heads, -1).permute(2, 0, 3, 1, 4).unbind(0)
        attn = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)
        attn = attn * torch.clamp(self.logit_scale, max=math.log(1.0 / 0.01)).exp()
        table = self.cpb_mlp(self.coords_table).view(-1, self.heads)
        n = self.ws * self.ws  # timm's window_area: a number, not a size read from the input
        bias = table[self.index.view(-1)].view(n, n, -1).permute(2, 0, 1).contiguous()
        attn = (attn + 16 * torch.sigmoid(bias).unsqueeze(0)).softmax(-1)
        y = self.proj((attn @ v).transpose(1, 2).reshape(B_, N, -1))
        return self.head(y.reshape(B, -1, C).mean(1))


def _imported():
    torch.manual_seed(0)
    module = CosineWindowAttention().eval()
    result = import_module(module, (4, 4, 8), strict=True)
    built = build_module(result.graph).eval()
    built.load_state_dict(result.state_dict)
    return module, result, built


@pytest.mark.slow  # ~4 s of CPU: make test runs it, make test-fast leaves it out
def test_weights_computed_from_parameters_import_as_computed_nodes_and_train():
    module, result, built = _imported()
    computed = {n.id: n.params["shape"] for n in result.graph if n.type == "Computed"}
    # the qkv bias, the logit scale, the position bias from the MLP (its gather and sigmoid included)
    assert sorted(computed.values()) == [[2, 1, 1], [2, 4, 4], [24]]
    owned = {k.split(".", 1)[1] for k in result.state_dict if k.split(".")[0] in computed}
    assert owned == {"q_bias", "v_bias", "logit_scale", "cpb_mlp_0_weight", "cpb_mlp_0_bias",
                     "cpb_mlp_2_weight"}  # weights, not frozen
    for batch in (1, 3):
        x = torch.randn(batch, 4, 4, 8, generator=torch.Generator().manual_seed(batch))
        with torch.no_grad():
            torch.testing.assert_close(built(x), module(x), rtol=1e-5, atol=1e-6)
    stats = analyze(result.graph, batch=1)
    with FlopCounterMode(display=False) as counter:
        module(torch.randn(1, 4, 4, 8))
    assert stats.total_flops == counter.get_total_flops()
    assert stats.total_params == sum(p.numel() for p in module.parameters())
    built(torch.randn(2, 4, 4, 8)).square().sum().backward()
    grads = {k: p.grad for k, p in built.named_parameters() if k.split(".")[0] in computed}
    assert len(grads) == 6 and all(g is not None and g.abs().sum() > 0 for g in grads.values())


@pytest.mark.export
def test_computed_nodes_export_to_onnx_and_agree_with_onnxruntime(tmp_path):
    _, result, built = _imported()
    source = ExportSource(result.graph, built, random_inputs(result.graph, 3), "computed", "imported SwinV2 attention")
    report = export(source, "onnx", tmp_path / "computed.onnx", ExportOptions(timing_runs=1))
    assert report.ok, report.to_text()
    assert report.metrics["max_abs_diff"] < 1e-4


def _graph_with(recipe: str, shape: list[int]) -> Graph:
    g = Graph(InputSpec((shape[0],)), 3)
    for type_, node_id, params in [("Input", "input", {}), ("Computed", "bias", {"shape": shape, "recipe": recipe}),
                                   ("Add", "add", {}), ("Linear", "fc", {"out_features": 3}), ("Output", "output", {})]:
        g.add_node(type_, node_id, params)
    for src, dst in [("input", "add"), ("bias", "add"), ("add", "fc"), ("fc", "output")]:
        g.connect(src, dst)
    return g


def test_a_damaged_or_foreign_recipe_is_refused_naming_what_is_wrong():
    with pytest.raises(Exception, match="recipe cannot be read"):
        build_module(_graph_with("bm90IGEgcmVjaXBl", [12]))
    foreign = encode_recipe(Recipe([["w", "learned", "float32", [12]]], [["aten.save.default", [{"ref": 0}], {}]], 1, {}))
    with pytest.raises(Exception, match=r"aten.save.default, which is not among the ops a Computed node may run"):
        build_module(_graph_with(foreign, [12]))
    doubled = encode_recipe(Recipe([["w", "learned", "float32", [6]]], [["aten.cat.default", [[{"ref": 0}] * 2], {}]],
                                   1, {}))
    build_module(_graph_with(doubled, [12]))  # [w, w]: 12 values, as the node says
    with pytest.raises(Exception, match=r"recipe computes \[12\] \(after the batch dimension of 1\), shape says \[6\]"):
        build_module(_graph_with(doubled, [6]))


class PickedBiases(nn.Module):
    """EfficientViT-MSRA's ``attn + bias[head]`` of a gathered table, one head at a time, and EfficientViM's
    ``alpha = sigmoid(self.alpha).view(2, -1, 1)`` read as ``alpha[0]`` and ``alpha[1]``."""

    def __init__(self, n: int = 5, c: int = 6, heads: int = 3) -> None:
        super().__init__()
        self.heads = heads
        self.biases = nn.Parameter(torch.randn(heads, 7))
        self.register_buffer("idxs", torch.randint(0, 7, (n, n), generator=torch.Generator().manual_seed(1)))
        self.alpha = nn.Parameter(torch.randn(2 * c))
        self.mix, self.head = nn.Linear(c, c), nn.Linear(heads * c, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [B, N, C]
        alpha = torch.sigmoid(self.alpha).view(2, -1)
        x = x + alpha[0] * (self.mix(x) - x) * alpha[1]
        bias = self.biases[:, self.idxs]
        outs = [((x @ x.transpose(1, 2)) * 0.5 + bias[h]).softmax(-1) @ x for h in range(self.heads)]
        return self.head(torch.cat(outs, -1).mean(1))


@pytest.mark.slow  # ~3 s of CPU
def test_picks_of_one_computed_tensor_are_the_parts_of_its_unbind():
    torch.manual_seed(0)
    module = PickedBiases().eval()
    result = import_module(module, (5, 6), strict=True)
    types = [n.type for n in result.graph]
    assert types.count("Computed") == 2 and types.count("Unbind") == 2
    built = build_module(result.graph).eval()
    built.load_state_dict(result.state_dict)
    for batch in (1, 3):
        x = torch.randn(batch, 5, 6, generator=torch.Generator().manual_seed(batch))
        with torch.no_grad():
            torch.testing.assert_close(built(x), module(x), rtol=1e-5, atol=1e-6)
    stats = analyze(result.graph, batch=1)
    with FlopCounterMode(display=False) as counter:
        module(torch.randn(1, 5, 6))
    assert stats.total_flops == counter.get_total_flops()
    assert stats.total_params == sum(p.numel() for p in module.parameters())
