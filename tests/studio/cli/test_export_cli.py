"""``torch-studio export`` from a terminal: exit status, printed report, report files, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from exporters import UNVERIFIED
from exporters.source import build_reference
from graph_editor.model import save_graph
from studio.cli import main
from tests.exporters.export_graphs import TEMPLATES, tiny_ln_graph

pytestmark = pytest.mark.export


@pytest.fixture
def ln_graph_file(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.graph.json"
    save_graph(tiny_ln_graph(), path)
    return path


def test_export_a_graph_file_to_onnx(tmp_path, capsys):
    code = main(["export", str(TEMPLATES / "mlp.graph.json"), "--format", "onnx", "-o", str(tmp_path) + "/"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "onnx export PASSED" in out and "onnxruntime parity (batch 3)" in out
    data = json.loads((tmp_path / "mlp.onnx.report.json").read_text())
    assert data["ok"] and (tmp_path / "mlp.onnx").exists()


def test_a_failed_check_exits_1_and_keeps_the_report(ln_graph_file, tmp_path, capsys):
    """Weights that went NaN (a diverged run) cannot be proven equal: the export fails, loudly."""
    weights = build_reference(tiny_ln_graph()).state_dict()
    weights["fc1.weight"][0, 0] = float("nan")
    save_file({k: v.contiguous() for k, v in weights.items()}, str(tmp_path / "nan.safetensors"))
    out_file = tmp_path / "out" / "model.onnx"
    code = main(["export", str(ln_graph_file), "--format", "onnx", "-o", str(out_file),
                 "--checkpoint", str(tmp_path / "nan.safetensors")])
    out = capsys.readouterr().out
    assert code == 1
    assert "onnx export FAILED" in out and "[FAIL] onnxruntime parity" in out and "NaN" in out
    assert not out_file.exists() and out_file.with_name("model.onnx" + UNVERIFIED).exists()
    data = json.loads(out_file.with_name("model.onnx.report.json").read_text())
    assert data["ok"] is False and data["path"].endswith(UNVERIFIED)


def test_a_layer_the_opset_lacks_is_named(ln_graph_file, tmp_path, capsys):
    code = main(["export", str(ln_graph_file), "--format", "onnx", "--opset", "13", "-o", str(tmp_path / "m.onnx")])
    err = capsys.readouterr().err
    assert code == 1 and "node 'ln1' (LayerNorm)" in err and "opset 17" in err and "Traceback" not in err


def test_no_verify_says_so(ln_graph_file, tmp_path, capsys):
    code = main(["export", str(ln_graph_file), "--format", "pt2", "-o", str(tmp_path / "m.pt2"), "--no-verify"])
    out = capsys.readouterr().out
    assert code == 0 and "NOT VERIFIED" in out and (tmp_path / "m.pt2").exists()


@pytest.mark.parametrize("args, message", [
    (["--format", "zip"], "unknown export format 'zip'"),
    (["--format", "onnx", "--checkpoint", "best"], "--checkpoint best needs a RUN_ID"),
    (["--format", "tensorboard"], "give a run id"),
    (["--format", "onnx", "--checkpoint", "missing.safetensors"], "no such checkpoint file"),
])
def test_bad_requests_are_clear_errors(ln_graph_file, tmp_path, capsys, args, message):
    code = main(["export", str(ln_graph_file), "-o", str(tmp_path / "out"), *args])
    err = capsys.readouterr().err
    assert code == 1 and message in err and "Traceback" not in err


def test_a_checkpoint_of_another_graph_names_the_node(ln_graph_file, tmp_path, capsys):
    weights = build_reference(tiny_ln_graph()).state_dict()
    weights["fc2.weight"] = torch.zeros(5, 16)
    save_file({k: v.contiguous() for k, v in weights.items()}, str(tmp_path / "other.safetensors"))
    code = main(["export", str(ln_graph_file), "--format", "onnx", "-o", str(tmp_path / "m.onnx"),
                 "--checkpoint", str(tmp_path / "other.safetensors")])
    err = capsys.readouterr().err
    assert code == 1 and "node 'fc2' has tensors of another shape" in err


def test_missing_executorch_is_a_clear_message(ln_graph_file, tmp_path, capsys):
    import importlib.util

    if importlib.util.find_spec("executorch") is not None:
        pytest.skip("executorch is installed here: the .pte tests cover it")
    code = main(["export", str(ln_graph_file), "--format", "pte", "-o", str(tmp_path / "m.pte")])
    err = capsys.readouterr().err
    assert code == 1 and 'pip install "torch-studio[edge]"' in err
