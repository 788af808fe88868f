"""The learnable Parameter node (class token, position embedding, layer scale) and ExpandBatch: shapes,
inits, validation of a node without inputs, import of parameters read in forward, model.py and ONNX."""

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
from graph_editor.importer import import_module
from graph_editor.model import Edge, Graph, InputSpec, validate


def token_net(init: str = "trunc_normal") -> Graph:
    """Tokens [B, 4, 8] -> Linear(16); a class token expanded to the batch is prepended, a position
    embedding added; the class token's row is the head's input."""
    g = Graph(InputSpec((4, 8)), 3, {"name": "tokens"})
    g.chain(("Input", "input"), ("Linear", "proj", {"out_features": 16}))
    g.add_node("Parameter", "cls_token", {"shape": [1, 16], "init": "zeros"})
    g.add_node("ExpandBatch", "cls_batch")
    g.connect("cls_token", "cls_batch", dst_port="in")
    g.connect("proj", "cls_batch", dst_port="like")
    g.add_node("Concat", "tokens", {"dim": 1})
    g.connect("cls_batch", "tokens")
    g.connect("proj", "tokens")
    g.add_node("Parameter", "pos_embed", {"shape": [5, 16], "init": init, "std": 0.5})
    g.add_node("Add", "placed")
    g.connect("tokens", "placed")
    g.connect("pos_embed", "placed")
    g.chain(("SelectToken", "cls", {"index": 0}), ("Linear", "head", {"out_features": 3}), ("Output", "output"),
            start="placed")
    return g


def test_a_node_without_inputs_validates_and_its_batch_is_one():
    inf = validate(token_net(), batch=6)
    assert inf.ok and not inf.problems, [str(p) for p in inf.problems]
    assert inf.shapes["cls_token"] == (1, 1, 16) and inf.shapes["pos_embed"] == (1, 5, 16)
    assert inf.shapes["cls_batch"] == (6, 1, 16) and inf.shapes["placed"] == (6, 5, 16)


def test_shapes_parameters_and_flops_match_pytorch():
    g = token_net()
    torch.manual_seed(0)
    built = build_module(g).eval()
    x = torch.randn(6, 4, 8)
    cls = built.get_submodule("cls_token")()
    assert tuple(cls.shape) == (1, 1, 16) and not cls.any()  # zeros
    with torch.no_grad():
        tokens = built.proj(x)
        expected = built.head((torch.cat([cls.expand(6, -1, -1), tokens], 1) + built.pos_embed.value)[:, 0])
        assert torch.equal(built(x), expected)
    stats = analyze(g, batch=6)
    assert stats.by_id()["pos_embed"].params == 5 * 16 and stats.by_id()["cls_token"].trainable == 16
    with FlopCounterMode(display=False) as counter:
        build_module(g, device="meta")(x.to("meta"))
    assert stats.total_flops == counter.get_total_flops()
    # The parameters train: a step changes them.
    built.train()
    built(x).sum().backward()
    assert built.pos_embed.value.grad is not None and built.cls_token.value.grad.abs().sum() > 0


@pytest.mark.parametrize("init, check", [
    ("zeros", lambda v: not v.any()),
    ("ones", lambda v: bool((v == 1).all())),
    ("normal", lambda v: 0.4 < float(v.std()) < 0.6),
    ("trunc_normal", lambda v: float(v.abs().max()) <= 1.0 and 0.3 < float(v.std()) < 0.6),
])
def test_inits(init, check):
    torch.manual_seed(0)
    value = build_module(token_net(init)).pos_embed.value.detach()
    value = torch.cat([value, build_module(token_net(init)).pos_embed.value.detach()])
    assert check(value), value


def test_a_wire_into_a_parameter_and_a_batch_mismatch_are_named():
    g = token_net()
    g.add_edge(Edge("input", "cls_token"), check=False)  # as a hand-edited file could
    problems = [str(p) for p in validate(g).problems]
    assert any("cls_token.in: has no input port 'in'" in p for p in problems), problems
    g = token_net()
    g.remove_edge(Edge("cls_token", "cls_batch", "out", "in"))
    g.remove_edge(Edge("proj", "cls_batch", "out", "like"))
    g.connect("proj", "cls_batch", dst_port="in")  # batch 6 cannot become the Parameter's batch 1
    g.connect("pos_embed", "cls_batch", dst_port="like")
    problem = next(p for p in validate(g, batch=6).problems if p.node == "cls_batch")
    assert "expects a tensor of batch 1 (a Parameter) or of the batch of 'like' (1), receives 6x4x16" in \
        problem.message


class TinyViT(nn.Module):
    """The parameters a ViT reads in forward: class token (expanded to the batch and prepended), position
    embedding, a layer scale gamma, a shift of shape [D]; attention on heads from a chunked qkv."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 16)
        self.cls_token = nn.Parameter(torch.randn(1, 1, 16))
        self.pos_embed = nn.Parameter(torch.randn(1, 5, 16))
        self.qkv = nn.Linear(16, 48)
        self.gamma = nn.Parameter(torch.randn(16))
        self.shift = nn.Parameter(torch.randn(16))
        self.head = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = self.proj(x)
        t = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), t], dim=1) + self.pos_embed
        b, n, c = t.shape
        q, k, v = self.qkv(t).chunk(3, dim=-1)
        q, k, v = (q.reshape(b, n, 2, 8).transpose(1, 2), k.reshape(b, n, 2, 8).transpose(1, 2),
                   v.reshape(b, n, 2, 8).transpose(1, 2))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        t = t + a.transpose(1, 2).reshape(b, n, c) * self.gamma  # a layer scale: folds into a Scale node
        return self.head(t[:, 0] + self.shift)


@pytest.mark.slow
def test_parameters_read_in_forward_import_as_nodes_with_their_values():
    torch.manual_seed(2)
    module = TinyViT().eval()
    result = import_module(module, (4, 8))
    g = result.graph
    params = {n.id: n.params["shape"] for n in g if n.type == "Parameter"}
    assert params == {"cls_token": [1, 16], "pos_embed": [5, 16], "shift": [16]}
    assert [n.type for n in g if n.type in ("ExpandBatch", "ScaledDotProductAttention", "Chunk")] == [
        "ExpandBatch", "Chunk", "ScaledDotProductAttention"]
    assert torch.equal(result.state_dict["shift.value"], module.shift.detach()[None])  # [D] read as [1, D]
    rebuilt = build_module(g).eval()
    rebuilt.load_state_dict(result.state_dict)
    x = torch.randn(3, 4, 8)
    with torch.no_grad():
        assert (rebuilt(x) - module(x)).abs().max() < 1e-6
    assert analyze(g, batch=3).total_params == sum(p.numel() for p in module.parameters())


def test_a_buffer_read_in_forward_is_a_constant_node_holding_its_values():
    class WithBuffer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 4)
            self.register_buffer("shift", torch.arange(4.0))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(x) + self.shift

    module = WithBuffer().eval()
    result = import_module(module, (4,), strict=True)
    (node,) = [n for n in result.graph if n.type == "Constant"]
    assert node.params["shape"] == [4] and node.params["dtype"] == "float32"
    assert not [k for k in result.state_dict if k.startswith(f"{node.id}.")]  # the graph holds it, not the weights
    rebuilt = build_module(result.graph).eval()
    rebuilt.load_state_dict(result.state_dict)
    x = torch.randn(3, 4)
    with torch.no_grad():
        assert torch.equal(rebuilt(x), module(x))
    assert analyze(result.graph, batch=1).total_params == 20


@pytest.mark.export
def test_model_py_and_onnx_with_parameters(tmp_path):
    source = from_graph(token_net(), verify_batch=3)
    report = export(source, "python", tmp_path / "model.py", ExportOptions(timing_runs=1))
    assert report.ok, report.to_text()
    code = (tmp_path / "model.py").read_text()
    assert "pos_embed = self.pos_embed()  # 1 x 5 x 16" in code and "class LearnedTensor" in code
    model = load_generated(tmp_path / "model.py").load()
    x = source.example(4, seed=1)
    with torch.inference_mode():
        assert torch.equal(model(x), source.reference(x))
    onnx = export(source, "onnx", tmp_path / "tokens.onnx", ExportOptions(timing_runs=1))
    assert onnx.ok, onnx.to_text()
    assert onnx.metrics["max_abs_diff"] < 1e-5
