"""A node whose forward needs the data's values (``.item()``, a shape from the values): the autograd
capture names the node, the cause and the line instead of raising what fake tensors or meta raise."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from graph_editor.autograd.capture import CaptureError, capture_autograd
from graph_editor.building import build_module
from graph_editor.building.data_dependent import data_dependent_cause, describe
from graph_editor.model import Graph, InputSpec
from tests.graph_editor.compile_graphs import item_graph


def positive_count_graph() -> Graph:
    g = Graph(InputSpec((1, 8, 8)), 10, {"name": "mask count"})
    g.chain(("Input", "input"),
            ("Conv2d", "conv", {"out_channels": 4, "kernel_size": [3, 3], "padding": [1, 1]}),
            ("Module", "m3", {"cls": "tests.graph_editor.data_dependent_models:PositiveCount", "kwargs": "{}",
                              "in_shape": [4, 8, 8], "out_shape": [4, 8, 8]}),
            ("Flatten", "flat"), ("Linear", "fc", {"out_features": 10}), ("Output", "output"))
    return g


def test_capture_of_an_item_read_names_the_module_node_the_cause_and_the_line():
    graph = item_graph()
    with pytest.raises(CaptureError) as info:
        capture_autograd(graph, 4, use_cache=False)
    message = str(info.value)
    assert info.value.node == "scale"
    assert message.startswith("Module node scale (tests.graph_editor.module_node_models:ItemScale) calls .item() "
                              "at module_node_models.py:40 `return x / (x.abs().max().item() + 1.0)`")
    assert "a value that depends on the data, which a meta/fake run cannot compute" in message
    assert "the backward graph cannot be captured" in message
    assert graph.nodes["scale"].params["cls"].endswith(":ItemScale")   # the graph is left as it was
    assert build_module(graph)(torch.randn(2, 1, 8, 8)).shape == (2, 10)  # and still runs on real data


def test_capture_of_a_shape_from_the_values_names_the_op():
    with pytest.raises(CaptureError) as info:
        capture_autograd(positive_count_graph(), 2, use_cache=False)
    assert info.value.node == "m3"
    assert str(info.value).startswith(
        "Module node m3 (tests.graph_editor.data_dependent_models:PositiveCount) makes a tensor whose shape "
        "depends on the values (nonzero) at data_dependent_models.py:14 `return x * x[x > 0].numel() / x.numel()`")


def test_capture_of_a_module_names_its_child():
    from tests.graph_editor.data_dependent_models import ItemNet

    with pytest.raises(CaptureError) as info:
        capture_autograd(ItemNet(), 2, input_shape=(1, 8, 8))
    # the .item() is in the root's own forward, after conv ran: the last child that started is named
    assert info.value.node == "conv"
    assert "module conv (Conv2d) calls .item() at data_dependent_models.py:28" in str(info.value)


def test_other_failures_are_not_called_data_dependent():
    try:
        nn.Linear(3, 4)(torch.empty(2, 5, device="meta"))
    except RuntimeError as exc:
        assert data_dependent_cause(exc) is None and describe(exc, "node fc", "x") is None
    else:
        pytest.fail("a shape mismatch on meta raises")
    try:
        torch.empty(3, device="meta").sum().item()
    except RuntimeError as exc:
        assert data_dependent_cause(exc) == "calls .item()"


class _ItemNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        from tests.graph_editor.module_node_models import ItemScale
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.scale = ItemScale()
        self.flat = nn.Flatten()
        self.fc = nn.Linear(4 * 8 * 8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.flat(self.scale(self.bn(self.conv(x)))))


def test_a_module_that_reads_a_value_imports_with_it_kept_whole_and_its_weights_untouched():
    """Meta tensors have no values, so the importer's shapes come from one run on a small real
    batch with copies of the weights: batch norm's running statistics stay as they were."""
    from graph_editor.importer import import_module
    torch.manual_seed(0)
    net = _ItemNet()
    before = {k: v.clone() for k, v in net.state_dict().items()}
    result = import_module(net, (1, 8, 8))
    assert {k: torch.equal(v, before[k]) for k, v in net.state_dict().items()} == dict.fromkeys(before, True)
    scale = result.graph.nodes["scale"]
    assert scale.type == "Program" and scale.params["source"] == "scale (ItemScale)"
    built = build_module(result.graph)
    built.load_state_dict(result.state_dict)
    x = torch.randn(3, 1, 8, 8)
    torch.testing.assert_close(built.eval()(x), net.eval()(x))


def test_a_value_read_with_weights_on_meta_names_the_module_and_the_line():
    from graph_editor.importer import ModuleImportError, import_module
    with torch.device("meta"):
        net = _ItemNet()
    with pytest.raises(ModuleImportError) as info:
        import_module(net, (1, 8, 8), strict=True)  # else its program holds the read (test_program_node)
    message = str(info.value)
    assert "module scale (ItemScale) calls .item() at module_node_models.py:40" in message
    assert "weights" in message and "meta device" in message
