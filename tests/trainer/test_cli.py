"""``torch-studio train / runs / show`` through the real entry point and the real worker."""

from __future__ import annotations

import json
import subprocess
import sys

from graph_editor.model import save_graph

from .conftest import tiny_cnn


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "studio", *args], capture_output=True, text=True, timeout=300)


def test_train_then_runs_then_show(tmp_path):
    graph = tmp_path / "tiny.graph.json"
    save_graph(tiny_cnn(), graph)
    db = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    done = cli("train", str(graph), "--data", "digits", "--epochs", "2", "--batch-size", "32", "--lr", "0.01",
               "--device", "cpu", "--db", db)
    assert done.returncode == 0, done.stderr
    assert "run 1 completed after 2 epoch(s)" in done.stdout and "test accuracy" in done.stdout
    assert "epoch 2/2: train loss" in done.stderr

    listed = json.loads(cli("runs", "--db", db, "--json").stdout)
    assert [(r["id"], r["status"], r["epoch"]) for r in listed] == [(1, "completed", 2)]
    assert "spec" not in listed[0]
    table = cli("runs", "--db", db).stdout
    assert "tiny" in table and "completed" in table

    shown = json.loads(cli("show", "1", "--db", db, "--json").stdout)
    assert shown["spec"]["optim"]["lr"] == 0.01 and shown["spec"]["train"]["batch_size"] == 32
    assert {c["kind"] for c in shown["checkpoints"]} == {"best", "last"}
    assert len(shown["epochs"]) == 2 and "test/accuracy" in shown["final_metrics"]
    text = cli("show", "1", "--db", db).stdout
    assert "test confusion" in text and "checkpoint best" in text


def test_train_json_events_and_a_refused_spec(tmp_path):
    graph = tmp_path / "tiny.graph.json"
    save_graph(tiny_cnn(classes=3), graph)
    db = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    done = cli("train", str(graph), "--epochs", "1", "--db", db, "--json-events")
    assert done.returncode == 2
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events[-1]["event"] == "failed" and "has 3 classes" in events[-1]["message"]
    assert cli("show", "7", "--db", db).returncode == 1
