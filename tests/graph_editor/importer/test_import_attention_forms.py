"""SAM's and MViTv2's attention, in timm's own code, import strictly and exactly (issue 23).

SAM takes its heads apart with ``qkv.reshape(3, B * heads, N, -1).unbind(0)`` and builds a decomposed
relative-position bias with ``einsum("bhwc,hkc->bhwk", q, rel_pos_h[idx])``; MViTv2 writes the same bias with
five letters and adds it by writing the whole attention map in place. Each becomes catalog nodes (the gathered
tables Computed nodes read by MatMuls), and the graph built back gives the module's outputs."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from timm.models.mvitv2 import cal_rel_pos_type
from timm.models.vision_transformer_sam import VisionTransformerSAM
from torch import nn

from exporters.api import export
from exporters.source import ExportSource, random_inputs
from graph_editor.building import build_module
from graph_editor.importer import ImportResult, import_module


def _round_trip(module: nn.Module, shape: tuple[int, ...]) -> ImportResult:
    with torch.no_grad():  # all-zero tables (rel_pos) would prove nothing
        for p in module.parameters():
            if not p.any():
                p.normal_(0, 0.5)
    result = import_module(module, shape, strict=True)
    built = build_module(result.graph).eval()
    built.load_state_dict(result.state_dict)
    x = torch.randn(3, *shape, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want, got = module(x), built(x)
    assert float((want - got).abs().max()) <= 1e-5 * float(want.abs().max())
    return result


def _sam() -> nn.Module:
    torch.manual_seed(0)
    return VisionTransformerSAM(img_size=64, patch_size=16, embed_dim=32, depth=2, num_heads=2, window_size=2,
                                global_attn_indexes=(1,), use_rel_pos=True, neck_chans=16, num_classes=5,
                                global_pool="avg").eval()


@pytest.mark.slow  # ~2.5 s of CPU
def test_sam_s_encoder_imports_strictly_with_its_decomposed_relative_position_bias():
    types = [n.type for n in _round_trip(_sam(), (3, 64, 64)).graph]
    assert "Program" not in types
    assert types.count("MaskedAttention") == 2  # the bias is the attention's mask, per block
    assert types.count("MatMul") == 4  # q @ Rhᵀ and q @ Rwᵀ per block
    assert types.count("Computed") == 5  # Rhᵀ and Rwᵀ per block, the position embedding as exported


class PooledAttention(nn.Module):
    """MViTv2's attention core on 2x2 tokens, its bias added by timm's cal_rel_pos_type."""

    def __init__(self, c: int = 8, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(c, 3 * c)
        self.rel_pos_h = nn.Parameter(torch.randn(3, c // heads))
        self.rel_pos_w = nn.Parameter(torch.randn(3, c // heads))
        self.head = nn.Linear(c, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [B, 4 tokens, C]
        B, N, C = x.shape
        q, k, v = self.qkv(x).reshape(B, N, 3, self.heads, -1).permute(2, 0, 3, 1, 4).unbind(0)
        attn = (q * 0.5) @ k.transpose(-2, -1)
        attn = cal_rel_pos_type(attn, q, False, [2, 2], [2, 2], self.rel_pos_h, self.rel_pos_w)
        y = (attn.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, N, C)
        return self.head(y.mean(1))


@pytest.mark.slow  # ~0.8 s of CPU
def test_mvitv2_s_bias_written_into_the_attention_map_imports_strictly():
    torch.manual_seed(0)
    types = [n.type for n in _round_trip(PooledAttention().eval(), (4, 8)).graph]
    assert "Program" not in types
    assert types.count("Computed") == 2 and types.count("MatMul") == 4  # q @ kᵀ, attn @ v and the two biases


@pytest.mark.slow  # ~10 s of CPU
@pytest.mark.export
def test_sam_s_imported_encoder_exports_to_onnx_and_agrees_with_onnxruntime(tmp_path: Path):
    """Its attention's heads are folded into the batch (3-D q, k, v): MaskedAttention gives ONNX a head dim."""
    result = _round_trip(_sam(), (3, 64, 64))
    built = build_module(result.graph).eval()
    built.load_state_dict(result.state_dict)
    report = export(ExportSource(result.graph, built, random_inputs(result.graph, 2, 0), "sam", "imported SAM"),
                    "onnx", tmp_path / "sam.onnx")
    assert report.ok, [(c.name, c.detail) for c in report.checks if not c.passed]
