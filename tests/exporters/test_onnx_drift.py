"""tools/onnx_drift.py: each node's output in PyTorch float32 and in onnxruntime against float64, the tool that
found where visformer_tiny's ONNX proof fails (issue 23; docs/import.md, session 7)."""

from __future__ import annotations

import pytest
import torch

from exporters.source import random_inputs
from graph_editor.building import build_module
from graph_editor.model import Graph, InputSpec
from tests.tool_modules import load_tool

pytestmark = [pytest.mark.export, pytest.mark.slow]  # one ONNX export and two onnxruntime sessions: ~3 s of CPU


def attention_net() -> Graph:
    """Tokens, a LayerNorm, q/k/v Linears into SDPA, GELU, a head: softmax, reductions and an activation."""
    g = Graph(InputSpec((6, 8)), 3, {"name": "drift"})
    g.chain(("Input", "input"), ("LayerNorm", "norm"))
    for name in ("q", "k", "v"):
        g.chain((("Linear", name, {"out_features": 8})), start="norm")
    g.add_node("ScaledDotProductAttention", "attn")
    for port in ("q", "k", "v"):
        g.connect(port, "attn", dst_port=port)
    g.chain(("GELU", "act"), ("Flatten", "flat"), ("Linear", "head", {"out_features": 3}), ("Output", "output"),
            start="attn")
    return g


def test_every_node_is_measured_against_float64_in_torch_and_onnxruntime():
    load_tool("import_walk")
    drift = load_tool("onnx_drift")
    torch.manual_seed(0)
    graph = attention_net()
    rows = drift.drift(build_module(graph), random_inputs(graph, 2, 0))
    assert [r.node for r in rows] == ["norm", "q", "k", "v", "attn", "act", "flat", "head", "output"]
    assert all(r.ort is not None for r in rows if r.node != "flat")  # a Flatten of a reshape may have no node of its own
    assert all(r.largest > 0 and r.torch32 < 1e-6 and (r.ort or 0) < 1e-5 for r in rows), drift.table(rows)
    assert rows[-1].shape == (2, 3)
    assert [r.node for r in drift.grew_most(rows, 2)][-1] == "output" and len(drift.grew_most(rows, 2)) == 3
