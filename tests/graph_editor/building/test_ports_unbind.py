"""Unbind (one output per position of a dimension) and the attention pattern of timm's ViTs:
``qkv.reshape(B, N, 3, H, d).permute(2, 0, 3, 1, 4).unbind(0)`` imports as Unbind + Permute per part."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from exporters import ExportOptions, export, from_graph
from graph_editor.analysis import analyze
from graph_editor.building import build_module
from graph_editor.importer import import_module
from graph_editor.model import Graph, InputSpec, validate


def test_unbind_shapes_and_a_count_that_does_not_fit():
    g = Graph(InputSpec((3, 4)), 4)
    g.chain(("Input", "input"), ("Unbind", "parts", {"count": 3, "dim": 1}))
    g.chain(("Linear", "head", {"out_features": 4}), ("Output", "output"), start="parts")
    g.add_node("Add", "sum")
    g.connect("parts", "sum", src_port="out1")
    g.connect("parts", "sum", src_port="out2")
    inf = validate(g, batch=2)
    assert inf.ok and inf.port_shapes["parts"] == [(2, 4)] * 3
    g.set_param("parts", "count", 2)
    problems = [p for p in validate(g).problems if p.severity == "error"]
    assert any(p.node == "parts" and p.field == "count" and "has 3 positions, not 2" in p.message for p in problems)
    assert any(p.node == "sum" and "parts.out2" in p.message for p in problems)  # from the port that went away


class Heads(nn.Module):
    """timm's Attention, small: qkv in one Linear, taken apart after a permute that moves the batch."""

    def __init__(self, dim: int = 8, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, dim * 3)
        self.again = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)
        self.head = nn.Linear(dim, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        a = F.scaled_dot_product_attention(q, k, v)
        x = self.proj(a.transpose(1, 2).reshape(b, n, c))
        kept = self.again(x).reshape(b, n, 3, c).permute(2, 0, 1, 3).unbind(0)  # parts need no permute
        return self.head((x + kept[2]).mean(1))


def test_a_permute_that_moves_the_batch_before_unbind_imports_as_unbind_and_permutes():
    torch.manual_seed(0)
    module = Heads().eval()
    result = import_module(module, (5, 8), strict=True)
    g = result.graph
    unbinds = [n for n in g if n.type == "Unbind"]
    assert [(n.params["count"], n.params["dim"]) for n in unbinds] == [(3, 2), (3, 2)]
    first = unbinds[0].id
    permutes = [e.dst for e in g.out_edges(first)]
    assert len(permutes) == 3 and all(g.nodes[p].type == "Permute" and g.nodes[p].params["dims"] == [1, 0, 2]
                                      for p in permutes)
    assert {e.src_port for e in g.out_edges(first)} == {"out", "out1", "out2"}
    assert [e.src_port for e in g.out_edges(unbinds[1].id)] == ["out2"]  # the others unused
    rebuilt = build_module(g).eval()
    rebuilt.load_state_dict(result.state_dict)
    x = torch.randn(3, 5, 8)
    with torch.no_grad():
        assert (rebuilt(x) - module(x)).abs().max() < 1e-6


timm = pytest.importorskip("timm")


@pytest.mark.parametrize("name", ["vit_tiny_patch16_224", "deit_tiny_patch16_224"])
def test_timm_vits_import_whole(name):
    """Class token, position embedding, attention, MLP: all of a (two-block, 32-pixel) ViT and DeiT map,
    with exact parameters, FLOPs equal to FlopCounterMode (counted on meta, as the templates are: the
    CPU's fused attention kernel has no FLOP formula) and identical outputs."""
    torch.manual_seed(0)
    module = timm.create_model(name, pretrained=False, img_size=32, patch_size=8, depth=2).eval()
    result = import_module(module, (3, 32, 32), strict=True)
    types = {n.type for n in result.graph}
    assert {"Parameter", "ExpandBatch", "Unbind", "ScaledDotProductAttention"} <= types
    rebuilt = build_module(result.graph).eval()
    rebuilt.load_state_dict(result.state_dict)
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        assert (rebuilt(x) - module(x)).abs().max() < 1e-5
    stats = analyze(result.graph, batch=2)
    assert stats.total_params == sum(p.numel() for p in module.parameters())
    on_meta = timm.create_model(name, pretrained=False, img_size=32, patch_size=8, depth=2, device="meta")
    with FlopCounterMode(display=False) as counter:
        on_meta(x.to("meta"))
    assert stats.total_flops == counter.get_total_flops()


@pytest.mark.export
def test_an_imported_vit_exports_to_onnx(tmp_path):
    module = timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=32, patch_size=8, depth=1)
    graph = import_module(module.eval(), (3, 32, 32), strict=True).graph
    graph.num_classes = 1000
    report = export(from_graph(graph, verify_batch=2), "onnx", tmp_path / "vit.onnx", ExportOptions(timing_runs=1))
    assert report.ok, report.to_text()
    assert report.metrics["max_abs_diff"] < 1e-4
