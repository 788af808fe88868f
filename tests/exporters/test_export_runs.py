"""Exports of a real run: the worker trains a tiny net on the digits; exporters read the run store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from exporters import ExportError, ExportOptions, export, from_run
from graph_editor.model import Graph, InputSpec, save_graph
from trainer.protocol.client import WorkerClient
from trainer.store.runs import RunStore

pytestmark = [pytest.mark.export, pytest.mark.process]


def tiny_cnn() -> Graph:
    g = Graph(InputSpec((1, 8, 8)), 10, {"name": "tiny"})
    g.chain(("Input", "input"), ("Conv2d", "conv", {"out_channels": 8, "padding": 1}), ("ReLU", "relu"),
            ("AdaptiveAvgPool2d", "pool", {"output_size": [2, 2]}), ("Flatten", "flat"),
            ("Linear", "fc", {"out_features": 10}), ("Output", "output"))
    return g


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, int]:
    """One real worker run (2 epochs on the embedded digits); (store url, run id)."""
    folder = tmp_path_factory.mktemp("run")
    save_graph(tiny_cnn(), folder / "net.graph.json")
    spec = {"schema_version": 1, "name": "tiny digits", "model": {"graph": str(folder / "net.graph.json")},
            "train": {"epochs": 2, "batch_size": 64, "metrics_interval_s": 0.1}, "device": "cpu"}
    (folder / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
    db = f"sqlite:///{folder / 'runs.sqlite'}"
    with WorkerClient.run(folder / "spec.json", db=db) as worker:
        list(worker.events(timeout=120))
        code = worker.wait(120)
    assert code == 0, worker.stderr
    store = RunStore(db)
    run_id = store.runs()[-1].id
    store.close()
    return db, run_id


def test_onnx_of_a_run_is_checked_on_real_validation_samples_and_recorded(trained, tmp_path):
    db, run_id = trained
    source = from_run(run_id, checkpoint="best", store=db)
    assert "raw validation samples" in " ".join(source.notes) and len(source.samples) == 64
    report = export(source, "onnx", tmp_path, ExportOptions(timing_runs=2))
    assert report.ok, report.to_text()
    assert Path(report.path).name == f"tiny_digits_run{run_id}.onnx"
    assert report.metrics["verify_batch"] == 64 and report.metrics["top1_agreement"] == 1.0
    store = RunStore(db)
    artifacts = store.artifacts(run_id)
    store.close()
    assert [a.kind for a in artifacts][-1] == "export.onnx"
    assert artifacts[-1].meta["ok"] is True and Path(artifacts[-1].meta["report"]).exists()
    assert artifacts[-1].id == report.metrics["artifact_id"]


def test_last_checkpoint_and_its_weights_are_the_ones_exported(trained, tmp_path):
    from trainer.checkpoints.single_file import load_checkpoint_weights

    db, run_id = trained
    store = RunStore(db)
    last = store.checkpoint_path(run_id, "last")
    store.close()
    source = from_run(run_id, checkpoint="last", store=db)
    assert torch.equal(source.module.state_dict()["fc.weight"], load_checkpoint_weights(last)["fc.weight"])
    report = export(source, "python", tmp_path / "model.py")
    assert report.ok, report.to_text()


def test_tensorboard_logs_of_a_run_read_back(trained, tmp_path):
    db, run_id = trained
    report = export(from_run(run_id, store=db), "tensorboard", tmp_path / "tb")
    assert report.ok, report.to_text()
    store = RunStore(db)
    rows = store.metrics(run_id)
    store.close()
    acc = EventAccumulator(str(tmp_path / "tb"), size_guidance={"scalars": 0})
    acc.Reload()
    assert "train/loss" in acc.Tags()["scalars"]
    written = {(s, n) for s, n, v in rows if v is not None}
    assert sum(len(acc.Scalars(t)) for t in acc.Tags()["scalars"]) == len(written)


def test_a_run_without_the_asked_checkpoint_is_an_error(trained, tmp_path):
    db, _ = trained
    with pytest.raises(ExportError, match="no run 999"):
        from_run(999, store=db)
    with pytest.raises(ExportError, match="no such checkpoint file"):
        from_run(trained[1], checkpoint=str(tmp_path / "missing.safetensors"), store=db)


def test_tensorboard_needs_a_run(tmp_path):
    from exporters import from_graph

    with pytest.raises(ExportError, match="give a run id"):
        export(from_graph(tiny_cnn()), "tensorboard", tmp_path / "tb")


def test_cli_exports_a_run_id(trained, tmp_path, capsys):
    from studio.cli import main

    db, run_id = trained
    code = main(["export", str(run_id), "--db", db, "--format", "safetensors", "-o", str(tmp_path / "w.safetensors")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"run {run_id} 'tiny digits', best checkpoint" in out and (tmp_path / "w.graph.json").exists()
