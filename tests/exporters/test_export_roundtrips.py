"""torch.export, model.py and safetensors round trips; every catalog layer; node-named refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from exporters import ExportError, ExportOptions, ExportSource, export, from_graph
from exporters.formats.python_format import load_generated
from graph_editor.model import all_layers
from tests.exporters.export_graphs import ZOOS, template

pytestmark = pytest.mark.export

# the zoos cover every layer type; three templates add real depth (residual adds in resnet18_cifar)
ROUND_TRIP_GRAPHS = (*ZOOS, "mlp", "lenet5", "resnet18_cifar")
FAST = ExportOptions(timing_runs=2)


def graph_named(name: str):
    return ZOOS[name]() if name in ZOOS else template(name)


@pytest.fixture(scope="module")
def sources() -> dict[str, ExportSource]:
    return {name: from_graph(graph_named(name), verify_batch=3) for name in ROUND_TRIP_GRAPHS}


@pytest.mark.parametrize("name", ROUND_TRIP_GRAPHS)
def test_model_py_reproduces_the_graph_exactly(sources, tmp_path, name):
    source = sources[name]
    report = export(source, "python", tmp_path / "model.py", FAST)
    assert report.ok, report.to_text()
    code = (tmp_path / "model.py").read_text()
    assert "class " in code and "def forward(self, x: torch.Tensor)" in code
    # Standalone: nothing of the project, also for an exported-program, a Constant and a Computed node (the catalog
    # graph has them), whose classes are copied with the loader, decoder and recipe reader they need
    assert [line for line in code.splitlines() if "graph_editor" in line] == []
    types = {n.type for n in source.graph.nodes.values()}
    copied = {"Program": "class ExportedProgramModule(nn.Module):", "Constant": "class FixedTensor(nn.Module):",
              "Computed": "class ComputedTensor(nn.Module):"}
    assert all(line in code for kind, line in copied.items() if kind in types)
    x = source.example(5, seed=7)  # neither the traced nor the verified batch size
    model = load_generated(tmp_path / "model.py").load()
    with torch.inference_mode():
        assert torch.equal(model(x), source.reference(x))


@pytest.mark.parametrize("name", (*ZOOS, "lenet5"))
def test_pt2_loads_back_and_matches(sources, tmp_path, name):
    source = sources[name]
    report = export(source, "pt2", tmp_path / "m.pt2", FAST)
    assert report.ok, report.to_text()
    assert [c.name for c in report.checks][:2] == ["torch.export.load", "save/load round trip"]
    x = source.example(5, seed=7)
    loaded = torch.export.load(str(tmp_path / "m.pt2")).module()
    with torch.inference_mode():
        torch.testing.assert_close(loaded(x), source.reference(x), rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("name", ("conv_zoo", "tabular_zoo"))
def test_safetensors_with_the_graph_file(sources, tmp_path, name):
    from safetensors import safe_open

    source = sources[name]
    report = export(source, "safetensors", tmp_path / "w.safetensors", FAST)
    assert report.ok, report.to_text()
    assert (tmp_path / "w.graph.json").exists()
    with safe_open(str(tmp_path / "w.safetensors"), "pt") as f:
        assert '"nodes"' in f.metadata()["torch_studio.graph"]
        assert set(f.keys()) == set(source.module.state_dict())


def test_the_zoos_cover_every_catalog_layer():
    """So that model.py (and each format) is proven on every layer type the palette offers."""
    used = {n.type for make in ZOOS.values() for n in make()}
    assert used == {spec.type for spec in all_layers()}


class DataDependent(nn.Module):
    """Python control flow on tensor values: no graph format can capture the branch."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x if x.sum() > 0 else -x


@pytest.fixture
def untraceable() -> ExportSource:
    source = from_graph(ZOOS["tabular_zoo"]())
    source.module.act = DataDependent()  # the node 'act' now holds a module no exporter can trace
    return source


@pytest.mark.parametrize("fmt, what", [("pt2", "torch.export"), ("onnx", "ONNX"), ("python", "PyTorch source")])
def test_a_layer_the_format_cannot_express_is_named(untraceable, tmp_path, fmt, what):
    with pytest.raises(ExportError) as err:
        export(untraceable, fmt, tmp_path / f"m.{fmt}")
    assert err.value.node == "act"
    message = str(err.value)
    assert message.startswith(what) and "cannot express node 'act' (ReLU)" in message
    assert "data-dependent" in message or "no source writer" in message
    assert not list(Path(tmp_path).iterdir())
