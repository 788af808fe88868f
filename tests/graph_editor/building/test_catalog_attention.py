"""Scaled-dot-product attention as one node: q, k, v ports, shapes and FLOPs against PyTorch and
FlopCounterMode, the F.scaled_dot_product_attention import rule, model.py and ONNX."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from exporters import ExportOptions, export, from_graph
from exporters.formats.python_format import load_generated
from graph_editor.analysis import analyze
from graph_editor.building import build_module
from graph_editor.building.fx import BuildError
from graph_editor.importer import import_module
from graph_editor.model import Graph, InputSpec, validate


def attention_net(q_len: int, kv_len: int, heads: int | None, params: dict | None = None) -> Graph:
    """Queries from one Linear of the input, keys and values from two others over a second sequence
    (a Linear on the transposed input changes its length), optionally reshaped into heads."""
    g = Graph(InputSpec((q_len, 8)), 3, {"name": "sdpa"})
    g.add_node("Input", "input")
    g.chain(("Linear", "q", {"out_features": 8}), start="input")
    g.chain(("Permute", "t", {"dims": [1, 0]}), ("Linear", "len", {"out_features": kv_len}),
            ("Permute", "back", {"dims": [1, 0]}), start="input")
    g.chain(("Linear", "k", {"out_features": 8}), start="back")
    g.chain(("Linear", "v", {"out_features": 12}), start="back")
    sources = {"q": "q", "k": "k", "v": "v"}
    if heads:
        for port, node in list(sources.items()):
            n = q_len if port == "q" else kv_len
            width = 12 if port == "v" else 8
            g.chain(("Reshape", f"{node}_heads", {"shape": [n, heads, width // heads]}),
                    ("Permute", f"{node}_first", {"dims": [1, 0, 2]}), start=node)
            sources[port] = f"{node}_first"
    g.add_node("ScaledDotProductAttention", "attn", params or {})
    for port, node in sources.items():
        g.connect(node, "attn", dst_port=port)
    g.chain(("Flatten", "flat"), ("Linear", "head", {"out_features": 3}), ("Output", "output"), start="attn")
    return g


CASES = [(5, 5, None, {}), (5, 7, None, {"scale": 0.3}), (6, 4, 2, {"is_causal": True}), (3, 9, 4, {})]


@pytest.mark.parametrize("q_len, kv_len, heads, params", CASES)
def test_shapes_and_flops_match_pytorch_and_flop_counter(q_len, kv_len, heads, params):
    g = attention_net(q_len, kv_len, heads, params)
    inf = validate(g, batch=2)
    assert inf.ok, [str(p) for p in inf.problems]
    expected = (2, heads, q_len, 12 // heads) if heads else (2, q_len, 12)
    assert inf.shapes["attn"] == expected
    torch.manual_seed(0)
    built = build_module(g).eval()
    x = torch.randn(2, q_len, 8)
    seen = {}
    built.get_submodule("attn").register_forward_hook(lambda m, args, out: seen.update(args=args, out=out))
    with torch.no_grad():
        built(x)
        q, k, v = seen["args"]
        oracle = F.scaled_dot_product_attention(q, k, v, is_causal=params.get("is_causal", False),
                                                scale=params.get("scale"))
    assert tuple(seen["out"].shape) == expected and torch.allclose(seen["out"], oracle, atol=1e-6)
    flops = analyze(g, batch=2).by_id()["attn"].flops
    for device in ("meta", "cpu"):  # the counted kernel on meta, the math path's matmuls on the CPU
        module = build_module(g, device=device).get_submodule("attn")
        with FlopCounterMode(display=False) as counter:
            module(q.to(device), k.to(device), v.to(device))
        assert flops == counter.get_total_flops(), device


def test_keys_of_other_features_than_queries_are_refused():
    g = attention_net(5, 7, None)
    g.set_param("k", "out_features", 6)
    problem = next(p for p in validate(g).problems if p.node == "attn")
    assert "keys have 6 features, queries 8: they must match (q 5x8, k 7x6)" in problem.message


def test_values_of_another_length_than_keys_are_refused():
    g = attention_net(5, 7, None)
    g.remove_edge(next(e for e in g.edges if e.dst == "attn" and e.dst_port == "v"))
    g.connect("q", "attn", dst_port="v")
    problem = next(p for p in validate(g).problems if p.node == "attn")
    assert "values have 5 positions, keys 7" in problem.message
    with pytest.raises(BuildError, match="values have 5 positions"):
        build_module(g)


class Attend(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(8, 24)
        self.head = nn.Linear(40, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).split([8, 8, 8], dim=-1)
        a = F.scaled_dot_product_attention(q, k, v, dropout_p=0.0, is_causal=True, scale=0.5)
        return self.head((a + x).flatten(1))


def test_import_of_f_scaled_dot_product_attention_round_trips():
    torch.manual_seed(1)
    module = Attend().eval()
    result = import_module(module, (5, 8))
    node = next(n for n in result.graph if n.type == "ScaledDotProductAttention")
    assert node.params == {"is_causal": True, "dropout_p": 0.0, "scale": 0.5}
    assert {e.dst_port: e.src_port for e in result.graph.in_edges(node.id)} == {"q": "out", "k": "out1",
                                                                                "v": "out2"}
    rebuilt = build_module(result.graph).eval()
    rebuilt.load_state_dict(result.state_dict)
    x = torch.randn(4, 5, 8)
    with torch.no_grad():
        assert (rebuilt(x) - module(x)).abs().max() < 1e-6


def test_a_mask_is_not_imported_silently():
    class Masked(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.scaled_dot_product_attention(x, x, x, attn_mask=x[:, :, :1] > 0).flatten(1)

    # A mask computed from the input has no layer (MaskedAttention takes a mask the graph holds): the
    # refusal names the op that makes it and its line.
    with pytest.raises(Exception, match=r"no Torch Studio layer:\n  gt \(operator.gt\) at .*attn_mask=x"):
        import_module(Masked(), (5, 8), strict=True)


@pytest.mark.export
def test_model_py_and_onnx_of_attention(tmp_path):
    source = from_graph(attention_net(6, 4, 2, {"is_causal": True}), verify_batch=3)
    report = export(source, "python", tmp_path / "model.py", ExportOptions(timing_runs=1))
    assert report.ok, report.to_text()
    assert "self.attn(q_first, k_first, v_first)" in (tmp_path / "model.py").read_text()
    model = load_generated(tmp_path / "model.py").load()
    x = source.example(4, seed=1)
    with torch.inference_mode():
        assert torch.equal(model(x), source.reference(x))
    onnx = export(source, "onnx", tmp_path / "attn.onnx", ExportOptions(timing_runs=1))
    assert onnx.ok, onnx.to_text()
    assert onnx.metrics["max_abs_diff"] < 1e-5
