"""ONNX of windowed attention as timm's MaxViT writes it (issue 23): windows folded into the batch, a
relative-position bias as the mask, the heads transposed back and reshaped. The exporter's decomposition
turned that reshape into a view its next pass could not apply (``Cannot view a tensor with shape
[4*s, 64, 2, 32] ... as (4*s, 8, 8, 64)``)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from graph_editor.importer.module_import import import_module
from tests.exporters.export_graphs import export_imported_onnx

pytestmark = [pytest.mark.export, pytest.mark.slow]  # an import and an export: ~6 s of CPU


class WindowAttention(nn.Module):
    """Four windows of 8x8 tokens a sample, two heads, a bias gathered from a table as the mask."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(64, 192)
        self.table = nn.Parameter(torch.randn(225, 2))
        self.register_buffer("index", torch.randint(0, 225, (4096,), generator=torch.Generator().manual_seed(0)))
        self.head = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, 4, 64, 64)
        t = self.qkv(x.reshape(-1, 64, 64))
        q, k, v = t.reshape(t.shape[0], 64, 2, 96).permute(0, 2, 1, 3).chunk(3, dim=3)
        bias = self.table[self.index].reshape(64, 64, 2).permute(2, 0, 1).unsqueeze(0)
        o = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias).permute(0, 2, 1, 3)
        o = o.reshape(o.shape[0], 8, 8, 64)
        return self.head(o.reshape(-1, 4, 64, 64).mean((1, 2)))


def test_a_reshape_after_windowed_attention_with_a_bias_exports_and_matches_onnxruntime(tmp_path):
    torch.manual_seed(0)
    result = import_module(WindowAttention().eval(), (4, 64, 64), name="windows", strict=True)
    assert "MaskedAttention" in [n.type for n in result.graph]
    report = export_imported_onnx(result, "windows", tmp_path)
    assert report.ok, report.to_text()
    assert report.metrics["max_abs_diff"] < 1e-4 and report.metrics["verify_batch"] == 3
