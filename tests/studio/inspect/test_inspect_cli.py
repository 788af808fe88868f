"""``torch-studio autograd``: the per-node backward table, JSON, and refusals without tracebacks."""

from __future__ import annotations

import json
from pathlib import Path

from tests.studio.cli.in_process import run

DIGITS = str(Path(__file__).resolve().parents[3] / "assets" / "templates" / "digits_cnn.graph.json")


def test_autograd_table_per_graph_node_and_totals(capsys):
    code, out, err = run(capsys, "autograd", DIGITS, "--batch", "8")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["node", "autograd", "saved", "gradients"]
    rows = {line.split()[0]: line for line in lines[2:-2]}
    assert list(rows)[:3] == ["conv1", "bn1", "relu1"] and list(rows)[-1] == "loss"
    assert "ConvolutionBackward0, AccumulateGrad x2" in rows["conv1"]
    assert rows["relu1"].split()[2:4] == ["64.00", "KiB"] and " bn1 " in rows["relu1"]  # 8x32x8x8 fp32
    assert "31 autograd nodes (14 AccumulateGrad) over 15 graph nodes" in lines[-1]
    assert "at batch 8, fp32, cpu (ran on fake-cpu)" in lines[-1]


def test_autograd_json_bf16(capsys):
    code, out, _ = run(capsys, "autograd", DIGITS, "--batch", "4", "--precision", "bf16", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["precision"] == "bf16" and data["batch"] == 4
    assert sum(n["name"] == "ToCopyBackward0" for n in data["nodes"]) >= 8  # autocast casts each weight and bias
    assert data["saved_bytes"] == sum(s["saved_bytes"] for s in data["summary"])
    conv2 = next(n for n in data["nodes"] if n["owner"] == "conv2" and n["name"] == "ConvolutionBackward0")
    assert {s["dtype"] for s in conv2["saved"]} == {"bfloat16"}


def test_autograd_refusals_name_the_problem(capsys, tmp_path):
    code, _, err = run(capsys, "autograd", DIGITS, "--batch", "0")
    assert code == 1 and err.strip() == "error: batch must be at least 1, got 0"
    code, _, err = run(capsys, "autograd", str(tmp_path / "missing.graph.json"))
    assert code == 1 and err.startswith("error:") and "missing.graph.json" in err and "Traceback" not in err


def test_inspect_prints_a_runs_stored_figures_and_flags(capsys, tmp_path):
    from trainer.inspection import InspectReport, NodeFigures
    from trainer.store.runs import RunStore

    url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    store = RunStore(url)
    run_id = store.create_run(name="r", spec={}, graph={}, graph_hash="h", device="cpu", params=1)
    for step, grad in ((10, 0.5), (20, 1e-9), (30, 2e-9)):
        report = InspectReport(step, 1.0, "cpu", [
            NodeFigures("conv", grad_out=0.4, grad_w=grad, weight=2.0, update_ratio=1e-3, act_mean=0.1, act_std=0.9,
                        zero_fraction=0.0, backward_s=2e-4),
            NodeFigures("relu", grad_out=0.3, act_mean=0.4, act_std=0.6, zero_fraction=0.5, backward_s=1e-4)])
        store.add_metrics(run_id, report.metric_rows())
    store.close()
    code, out, err = run(capsys, "inspect", str(run_id), "--db", url)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["node", "||dL/dy||", "||dL/dW||"]
    assert lines[2].split()[:3] == ["conv", "0.4", "2e-09"] and lines[3].split()[2] == "-"
    assert "50%" in lines[3] and "0.20" in lines[2]           # zero fraction, backward ms
    assert "step 30 (3 inspection(s) stored, steps 10..30)" in out
    assert "conv: gradient vanishing since step 20 (grad_w = 2e-09)" in out
    code, out, _ = run(capsys, "inspect", str(run_id), "--db", url, "--step", "10", "--json")
    data = json.loads(out)
    assert data["step"] == 10 and data["flags"] == [] and data["steps"] == [10, 20, 30]
    code, _, err = run(capsys, "inspect", str(run_id), "--db", url, "--step", "15")
    assert code == 1 and "not inspected at step 15; inspected steps: 10, 20, 30" in err


def test_the_parser_s_autograd_choices_are_the_capture_s():
    """The CLI names them itself (its parser imports no torch); they must stay the capture's own."""
    from graph_editor.autograd.capture import DEVICE_KINDS, PRECISIONS
    from studio.cli_inspect import DEVICE_KIND_CHOICES, PRECISION_CHOICES

    assert PRECISION_CHOICES == PRECISIONS and DEVICE_KIND_CHOICES == DEVICE_KINDS
