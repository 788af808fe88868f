"""ONNX of attention whose q, k and v are not 4-D (issue 23). NesT keeps its blocks, Twins its windows, as a dim
between the batch and the heads (q is ``[B, blocks, heads, tokens, dim]``); SAM folds its heads into the batch
(3-D). The exporter translates ``scaled_dot_product_attention`` for 4-D q, k and v only ("only 4D query, key,
and value are supported"): nest_tiny and twins_svt_small failed their whole-model export so. The attention
layers fold such q, k, v (and a mask) to 4-D and back; the fold must compute what PyTorch's own call does."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from graph_editor.building.ops.attention import MaskedAttention, ScaledDotProductAttention
from graph_editor.importer.module_import import import_module
from tests.exporters.export_graphs import export_imported_onnx


class BlockedAttention(nn.Module):
    """NesT's attention: 4 blocks of 9 tokens a sample, 2 heads, q/k/v ``[B, 4, 2, 9, 8]``; once plain, once with
    a mask per block that broadcasts over the batch and the heads (Swin's), and once over all 36 tokens, 3-D."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(16, 48)
        self.register_buffer("mask", torch.randn(4, 1, 9, 9, generator=torch.Generator().manual_seed(3)))
        self.head = nn.Linear(16, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, 4, 9, 16)
        b, t, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, t, n, 3, 2, c // 2).permute(3, 0, 1, 4, 2, 5).unbind(0)
        o = F.scaled_dot_product_attention(q, k, v) + F.scaled_dot_product_attention(q, k, v, attn_mask=self.mask)
        tokens = x.reshape(b, t * n, c)
        whole = F.scaled_dot_product_attention(tokens, tokens, tokens)  # (B, 36, 16)
        return self.head(o.permute(0, 1, 3, 2, 4).reshape(b, t * n, c).mean(1) + whole.mean(1))


@pytest.mark.export
@pytest.mark.slow  # an import and an ONNX export: 3 to 5 s of CPU
def test_attention_over_blocks_before_the_heads_exports_and_matches_onnxruntime(tmp_path):
    torch.manual_seed(0)
    result = import_module(BlockedAttention().eval(), (4, 9, 16), name="blocked", strict=True)
    types = [n.type for n in result.graph]
    assert types.count("ScaledDotProductAttention") == 2 and types.count("MaskedAttention") == 1
    report = export_imported_onnx(result, "blocked", tmp_path)
    assert report.ok, report.to_text()
    assert report.metrics["max_abs_diff"] < 1e-5 and report.metrics["verify_batch"] == 3


QKV = [(2, 9, 8), (2, 4, 2, 9, 8), (2, 3, 4, 2, 9, 8)]


@pytest.mark.parametrize("shape", QKV, ids=["3-D", "5-D", "6-D"])
def test_the_fold_to_4d_computes_what_pytorch_does(shape):
    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(shape, generator=gen) for _ in range(3))
    v = torch.cat([v, v[..., :3]], dim=-1)  # values of another width than the keys
    for layer, kwargs in [(ScaledDotProductAttention(), {}), (ScaledDotProductAttention(is_causal=True),
                                                              {"is_causal": True}),
                          (ScaledDotProductAttention(scale=0.3), {"scale": 0.3})]:
        assert torch.allclose(layer(q, k, v), F.scaled_dot_product_attention(q, k, v, **kwargs), atol=1e-6)


MASKS = [((2, 9, 8), (9, 9)), ((2, 9, 8), (2, 9, 9)), ((2, 9, 8), (1, 9, 9)),
         ((2, 4, 2, 9, 8), (9, 9)), ((2, 4, 2, 9, 8), (4, 1, 9, 9)), ((2, 4, 2, 9, 8), (4, 2, 9, 9)),
         ((2, 4, 2, 9, 8), (1, 4, 1, 9, 9)), ((2, 4, 2, 9, 8), (2, 4, 2, 9, 9)), ((2, 4, 2, 9, 8), (2, 9, 9)),
         ((2, 3, 4, 2, 9, 8), (3, 1, 1, 9, 9))]


@pytest.mark.parametrize("q_shape, mask_shape", MASKS, ids=[f"{len(q)}-D q, mask {m}" for q, m in MASKS])
def test_a_masks_broadcast_survives_the_fold(q_shape, mask_shape):
    gen = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(q_shape, generator=gen) for _ in range(3))
    mask = torch.randn(mask_shape, generator=gen)
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.5)
    assert torch.allclose(MaskedAttention(scale=0.5)(q, k, v, mask), want, atol=1e-6)
