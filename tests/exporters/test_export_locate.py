"""The node an export failure names is the model's own first cause (issue 23).

A node exported alone is tried out of its context, and can fail for reasons the model never meets:
- a position embedding added to transposed tokens (hiera): ONNX's export of the Add alone refuses
  (``Static shape constraint of 1 does not match input size of 2``), the model's passes;
- windows folded into the batch and unfolded again (swin, tiny_vit): the unfolding Reshape alone gets a
  batch of its own, which must split into windows (``Mod(batch, 4)``), and torch.export refuses it; in
  the model its batch is 4x the model's and always splits.
A search that exported each node alone named those nodes for whatever later node really failed."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from exporters import ExportError, ExportOptions, export, from_graph
from exporters.locate import find_failing_node
from graph_editor.model import Graph, InputSpec

pytestmark = [pytest.mark.export, pytest.mark.slow]  # five small ONNX exports and one torch.export: ~8 s of CPU


class DataDependent(nn.Module):
    """Python control flow on tensor values: no graph format can capture the branch."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x if x.sum() > 0 else -x


def windows() -> Graph:
    """Tokens transposed, a position embedding added, four windows of 8 features a sample folded into the
    batch, mixed, unfolded, then a head."""
    g = Graph(InputSpec((8, 4)), 3, {"name": "windows"})
    g.chain(("Input", "input"), ("Permute", "turn", {"dims": [1, 0]}))
    g.add_node("Parameter", "pos", {"shape": [4, 8]})
    g.add_node("Add", "add")
    g.connect("turn", "add")
    g.connect("pos", "add")
    g.chain(("Reshape", "fold", {"shape": [8], "fold_batch": True}), ("Linear", "mix", {"out_features": 8}),
            ("Reshape", "unfold", {"shape": [4, 8], "fold_batch": True}), ("GELU", "act"),
            ("Flatten", "flat"), ("Linear", "head", {"out_features": 3}), ("Output", "output"), start="add")
    return g


def test_the_named_node_is_the_one_the_model_fails_at_not_one_that_fails_only_alone(tmp_path):
    source = from_graph(windows())
    source.module.act = DataDependent()  # the node 'act' now holds a module no exporter can trace
    with pytest.raises(ExportError) as err:
        export(source, "onnx", tmp_path / "m.onnx", ExportOptions(timing_runs=0))
    assert err.value.node == "act", str(err.value)
    assert str(err.value).startswith("ONNX (opset 20) cannot express node 'act' (GELU)")
    assert "data-dependent" in str(err.value)
    assert not list(tmp_path.glob("m.onnx*"))


def test_a_graph_that_exports_whole_has_no_failing_node():
    """Nodes fail torch.export alone (the Parameter, which has no input to batch; the unfolding Reshape);
    the model, and so its last prefix, passes: no node is to blame."""
    source = from_graph(windows())
    tried: list[int] = []

    def attempt(module: nn.Module, args: tuple[torch.Tensor, ...]) -> object:
        tried.append(1)
        return torch.export.export(module, args, dynamic_shapes=({0: torch.export.Dim("batch")},))

    assert find_failing_node(source.module, source.example(2), attempt) is None
    assert len(tried) == 1  # the whole graph passes: nothing to bisect
