"""ONNX: the templates (one of each family; every one with TORCH_STUDIO_TEST_THOROUGH=1) and every catalog
layer export and agree with onnxruntime on a batch size other than the traced one."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from exporters import ExportError, ExportOptions, export, from_graph
from exporters.formats.onnx_format import verify_onnx
from exporters.source import build_reference
from tests.exporters.export_graphs import TEMPLATE_NAMES, catalog_zoos, template, tiny_ln_graph
from tests.trainer.helpers import THOROUGH

pytestmark = pytest.mark.export

# `make test`: a template of each family (the MLP, the small convnets, the residual net, the inverted
# residuals with their depthwise convolutions, the transformer). resnet18 and vgg11 repeat resnet18_cifar's
# and lenet5's layers at 224x224 (vgg11 writes a 531 MB file; the two cost 30 s of CPU here): exported
# with TORCH_STUDIO_TEST_THOROUGH=1. Every catalog layer is exported below either way.
ONNX_TEMPLATES = TEMPLATE_NAMES if THOROUGH else tuple(n for n in TEMPLATE_NAMES if n not in ("resnet18", "vgg11"))


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Each template exported once (verify batch 3, traced batch 2); tests below read the reports."""
    out = tmp_path_factory.mktemp("onnx")
    reports = {}
    for name in ONNX_TEMPLATES:
        source = from_graph(template(name), verify_batch=3)
        reports[name] = (source, export(source, "onnx", out / f"{name}.onnx", ExportOptions(timing_runs=2)))
    return reports


@pytest.mark.parametrize("name", ONNX_TEMPLATES)
def test_template_exports_and_matches_onnxruntime(exported, name):
    source, report = exported[name]
    assert report.ok, report.to_text()
    assert [c.name for c in report.checks] == ["onnx.checker", "dynamic batch", "onnxruntime parity (batch 3)",
                                                 "metadata"]
    m = report.metrics
    assert m["verify_batch"] != m["example_batch"]
    assert m["max_abs_diff"] < 1e-3 and m["top1_agreement"] == 1.0
    assert m["onnxruntime_ms"] > 0 and m["pytorch_eager_ms"] > 0 and m["file_bytes"] > 0
    assert m["opset"] == 20
    text = Path(report.report_files[1]).read_text()
    assert "PASSED" in text and "max abs diff" in text


@pytest.mark.parametrize("name", sorted(catalog_zoos()))
def test_every_catalog_layer_exports_and_matches_onnxruntime(tmp_path, name):
    """The graphs generated from the layer registry: every layer type, a new one included, in ONNX."""
    source = from_graph(catalog_zoos()[name](), verify_batch=3)
    report = export(source, "onnx", tmp_path / f"{name}.onnx", ExportOptions(timing_runs=0))  # the proof, untimed
    assert report.ok, report.to_text()
    assert report.metrics["max_abs_diff"] < 1e-3 and report.metrics["top1_agreement"] == 1.0


def test_report_json_is_beside_the_file(exported):
    import json

    _, report = exported["lenet5"]
    data = json.loads(Path(report.path + ".report.json").read_text())
    assert data["ok"] is True and data["format"] == "onnx" and data["metrics"]["opset"] == 20


def test_the_proof_without_timing_makes_every_check_and_no_latency_figure(exported):
    """``timing_runs=0`` (timm's walk over every family): the same checks, none of the timed calls."""
    source, report = exported["lenet5"]
    checks, figures = verify_onnx(report.path, source.reference, source.samples, ExportOptions(timing_runs=0))
    assert [(c.name, c.passed) for c in checks] == [("onnx.checker", True), ("dynamic batch", True),
                                                    ("onnxruntime parity (batch 3)", True)]
    assert figures["max_abs_diff"] < 1e-3 and figures["top1_agreement"] == 1.0
    assert "onnxruntime_ms" not in figures and "pytorch_eager_ms" not in figures


def test_verifier_rejects_a_file_of_another_model(exported):
    """A real ONNX file exported from other weights must fail parity, not pass quietly."""
    source, report = exported["lenet5"]
    other = build_reference(template("lenet5"), seed=123)
    checks, _ = verify_onnx(report.path, other, source.samples, ExportOptions(timing_runs=1))
    parity = checks[-1]
    assert parity.name.startswith("onnxruntime parity") and not parity.passed
    assert "outside rtol" in parity.detail


def test_verifier_rejects_a_corrupted_file(exported, tmp_path):
    source, report = exported["mlp"]
    data = Path(report.path).read_bytes()
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(data[: len(data) // 3])
    checks, figures = verify_onnx(broken, source.module, source.samples, ExportOptions())
    assert [c.passed for c in checks] == [False] and checks[0].name == "onnx.checker" and figures == {}


def test_opset_is_selectable(tmp_path):
    report = export(from_graph(tiny_ln_graph()), "onnx", tmp_path / "m.onnx", ExportOptions(opset=18, timing_runs=1))
    import onnx

    model = onnx.load(report.path)
    assert report.ok and [o.version for o in model.opset_import if o.domain == ""] == [18]


def test_an_opset_without_the_layer_names_the_node(tmp_path):
    with pytest.raises(ExportError) as err:
        export(from_graph(tiny_ln_graph()), "onnx", tmp_path / "m.onnx", ExportOptions(opset=13))
    assert err.value.node == "ln1"
    assert "opset 13 cannot express node 'ln1' (LayerNorm)" in str(err.value)
    assert not (tmp_path / "m.onnx").exists()


def test_external_data_and_low_precision_weights(tmp_path):
    """A model trained in bf16 exports in fp32; weights can live in an external data file."""
    from safetensors.torch import save_file

    graph = tiny_ln_graph()
    weights = {k: v.to(torch.bfloat16) if v.is_floating_point() else v
               for k, v in build_reference(graph, seed=5).state_dict().items()}
    save_file(weights, str(tmp_path / "bf16.safetensors"))
    source = from_graph(graph, checkpoint=tmp_path / "bf16.safetensors")
    assert source.weights_dtype == "bfloat16" and next(source.module.parameters()).dtype == torch.float32
    report = export(source, "onnx", tmp_path / "m.onnx", ExportOptions(external_data=True, timing_runs=1))
    assert report.ok, report.to_text()
    assert (tmp_path / "m.onnx.data").stat().st_size > 0 and len(report.files) == 2
    assert any("exported in float32" in n for n in report.notes)
    import onnx

    assert onnx.load(report.path, load_external_data=False).graph.input[0].type.tensor_type.elem_type == \
        onnx.TensorProto.FLOAT


def test_a_node_inside_the_preprocessing_wrapper_is_named_by_its_graph_id():
    """Exports of a run put the graph inside WithPreprocessing: its ONNX scopes read 'inner.<id>'."""
    import onnx

    from exporters.locate import onnx_node_owner

    node = onnx.helper.make_node("Relu", ["x"], ["y"])
    entry = node.metadata_props.add()
    entry.key, entry.value = "pkg.torch.onnx.name_scopes", "['', 'inner.relu1', 'relu']"
    assert onnx_node_owner(node) == "relu1"
