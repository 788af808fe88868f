"""What blocked the largest group of timm families (issue 23): windows folded into the batch dimension (Swin,
DaViT: ``x.view(-1, ws * ws, C)`` and back), constants (a window mask kept as a buffer, a position table computed
from sizes), shifted windows (``torch.roll``) and norms without a bias (poolformerv2). A small Swin-style block
written as people write it imports strictly and is the module at every batch, its FLOPs FlopCounterMode's; its
ONNX export agrees with onnxruntime."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from exporters import ExportOptions, export
from exporters.source import ExportSource, random_inputs
from graph_editor.analysis import analyze
from graph_editor.building import build_module
from graph_editor.importer import ModuleImportError, import_module
from graph_editor.model import Graph, InputSpec, validate
from graph_editor.model.errors import CommandError


def window_partition(x: torch.Tensor, ws: int) -> torch.Tensor:
    B, H, W, C = x.shape
    x = x.view(B, H // ws, ws, W // ws, ws, C).permute(0, 1, 3, 2, 4, 5).contiguous()
    return x.view(-1, ws * ws, C)  # [B * windows, tokens, C]: windows folded into the batch


def window_reverse(w: torch.Tensor, ws: int, H: int, W: int) -> torch.Tensor:
    x = w.view(-1, H // ws, W // ws, ws, ws, w.shape[-1]).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(-1, H, W, w.shape[-1])


class ShiftedWindows(nn.Module):
    """A Swin block's attention on shifted 2x2 windows of a 4x6 map, with a mask buffer per window."""

    def __init__(self, c: int = 8, ws: int = 2, heads: int = 2) -> None:
        super().__init__()
        self.ws, self.heads = ws, heads
        self.norm = nn.LayerNorm(c, bias=False)
        self.qkv, self.proj = nn.Linear(c, 3 * c), nn.Linear(c, c)
        self.head = nn.Sequential(nn.GroupNorm(1, c, bias=False), nn.Flatten(), nn.Linear(c * 4 * 6, 3))
        windows = (4 // ws) * (6 // ws)
        self.register_buffer("mask", torch.randn(windows, ws * ws, ws * ws).clamp(max=0) * 100)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [B, H, W, C]
        B, H, W, C = x.shape
        pos = torch.arange(W, dtype=x.dtype) / W  # computed from a size: a Constant
        shifted = torch.roll(self.norm(x + pos[:, None]), shifts=(-1, -1), dims=(1, 2))
        w = window_partition(shifted, self.ws)
        B_, N, _ = w.shape
        q, k, v = self.qkv(w).reshape(B_, N, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        attn = q @ k.transpose(-2, -1)
        nw = self.mask.shape[0]
        attn = attn.view(-1, nw, self.heads, N, N) + self.mask.unsqueeze(1).unsqueeze(0)
        attn = attn.view(-1, self.heads, N, N).softmax(-1)
        w = self.proj((attn @ v).transpose(1, 2).reshape(B_, N, -1))
        y = torch.roll(window_reverse(w, self.ws, H, W), shifts=(1, 1), dims=(1, 2))
        return self.head(y.permute(0, 3, 1, 2))


@pytest.mark.slow
def test_shifted_windows_import_strictly_and_are_the_module_at_every_batch():
    torch.manual_seed(0)
    module = ShiftedWindows().eval()
    result = import_module(module, (4, 6, 8), strict=True)
    types = [n.type for n in result.graph]
    assert types.count("Roll") == 2 and types.count("Constant") == 2  # the mask and the position table
    folds = [n.params["shape"] for n in result.graph if n.type == "Reshape" and n.params["fold_batch"]]
    # into windows; out to add the mask; back into windows; out of them
    assert folds == [[4, 8], [6, 2, 4, 4], [2, 4, 4], [2, 3, 2, 2, 8]]
    assert {n.params["bias"] for n in result.graph if n.type in ("LayerNorm", "GroupNorm")} == {False}
    constants = {n.id for n in result.graph if n.type == "Constant"}
    assert not [k for k in result.state_dict if k.split(".")[0] in constants]  # their values are the graph's
    built = build_module(result.graph).eval()
    built.load_state_dict(result.state_dict)
    for batch in (1, 3):  # a fold that were wrong would hold at the import's batch of 2 only
        x = torch.randn(batch, 4, 6, 8, generator=torch.Generator().manual_seed(batch))
        with torch.no_grad():
            torch.testing.assert_close(built(x), module(x), rtol=1e-5, atol=1e-6)
    stats = analyze(result.graph, batch=1)
    with FlopCounterMode(display=False) as counter:
        module(torch.randn(1, 4, 6, 8))
    assert stats.total_flops == counter.get_total_flops()
    assert stats.total_params == sum(p.numel() for p in module.parameters())


@pytest.mark.export
def test_shifted_windows_export_to_onnx_and_agree_with_onnxruntime(tmp_path):
    torch.manual_seed(0)
    result = import_module(ShiftedWindows().eval(), (4, 6, 8), strict=True)
    built = build_module(result.graph).eval()
    built.load_state_dict(result.state_dict)
    source = ExportSource(result.graph, built, random_inputs(result.graph, 3), "windows", "imported ShiftedWindows")
    report = export(source, "onnx", tmp_path / "windows.onnx", ExportOptions(timing_runs=1))
    assert report.ok, report.to_text()
    assert report.metrics["max_abs_diff"] < 1e-4


class BiasedAttention(nn.Module):
    """MaxViT's and TinyViT's attention: ``F.scaled_dot_product_attention(q, k, v, attn_mask=bias)``."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv, self.head = nn.Linear(8, 24), nn.Linear(8, 3)
        self.bias = nn.Parameter(torch.randn(1, 2, 5, 5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, N, C = x.shape
        q, k, v = self.qkv(x).reshape(B, N, 3, 2, 4).permute(2, 0, 3, 1, 4).unbind(0)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=self.bias)
        return self.head(y.transpose(1, 2).reshape(B, N, C).mean(1))


def test_attention_with_a_mask_imports_as_masked_attention():
    torch.manual_seed(0)
    module = BiasedAttention().eval()
    result = import_module(module, (5, 8), strict=True)
    assert [n.type for n in result.graph].count("MaskedAttention") == 1
    built = build_module(result.graph).eval()
    built.load_state_dict(result.state_dict)
    x = torch.randn(3, 5, 8)
    with torch.no_grad():
        torch.testing.assert_close(built(x), module(x), rtol=1e-5, atol=1e-6)
    with FlopCounterMode(display=False) as counter:
        module(torch.randn(1, 5, 8))
    assert analyze(result.graph, batch=1).total_flops == counter.get_total_flops()


class CosineTokens(nn.Module):
    """XCiT's cosine attention and position encoding, behind an ``if`` on a size that fx cannot follow: its
    exported program spells ``F.normalize`` as a norm, a clamp, an expand and a division, and ``pos.repeat(B, 1)``."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.register_buffer("pos", torch.randn(1, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != 5:
            raise ValueError("five tokens")
        q = F.normalize(-x.transpose(1, 2), dim=-1)  # rotary embeddings negate halves: -x is ScaleBy(-1)
        return self.fc(q.mean(1) + self.pos.repeat(x.shape[0], 1))


def test_the_exported_programs_normalize_and_repeat_map_to_layers():
    module = CosineTokens().eval()
    result = import_module(module, (4, 5), strict=True)
    types = [n.type for n in result.graph]
    assert "Normalize" in types and "ExpandBatch" in types and "Constant" in types and "ScaleBy" in types
    built = build_module(result.graph).eval()
    built.load_state_dict(result.state_dict)
    x = torch.randn(3, 4, 5)
    with torch.no_grad():
        assert torch.equal(built(x), module(x))


class FixedBatch(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(4, -1).sum(-1, keepdim=True)  # the batch written as a number: no fold at another batch


def test_a_reshape_that_fixes_the_batch_is_still_refused_by_name():
    with pytest.raises(ModuleImportError, match="reshapes across the batch dimension"):
        import_module(FixedBatch(), (2, 3), strict=True)


def test_fold_batch_and_roll_shape_rules_name_what_is_wrong():
    g = Graph(InputSpec((4, 6, 8)), 3)
    g.add_node("Input", "input")
    g.add_node("Reshape", "fold", {"shape": [5, 8], "fold_batch": True})
    g.add_node("Roll", "roll", {"shifts": [1], "dims": [0]})
    g.connect("input", "fold")
    g.connect("input", "roll")
    problems = {p.node: p.message for p in validate(g, batch=2).problems}
    assert "cannot fold 2x4x6x8 (384 values, batch included) into rows of 5x8" in problems["fold"]
    assert "cannot roll dim 0" in problems["roll"] and "batch" in problems["roll"]


def test_a_damaged_constant_is_refused_naming_its_values():
    g = Graph(InputSpec((4,)), 3)
    for type_, node_id, params in [("Input", "input", {}), ("Constant", "c", {"shape": [4], "values": "bm90IHNhZmV0ZW5z"}),
                                   ("Add", "add", {}), ("Linear", "fc", {"out_features": 3}), ("Output", "output", {})]:
        g.add_node(type_, node_id, params)
    for src, dst in [("input", "add"), ("c", "add"), ("add", "fc"), ("fc", "output")]:
        g.connect(src, dst)
    with pytest.raises(Exception, match="values cannot be read"):
        build_module(g)
    with pytest.raises(CommandError, match="dtype must be one of"):
        g.add_node("Constant", "d", {"shape": [4], "dtype": "complex64"})
