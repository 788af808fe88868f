"""``torch-studio train --distributed ddp --nproc-per-node 2`` through the real entry point: torchrun's
ranks train it, ``torch-studio runs`` lists one run (not one per rank), and its sharded best
checkpoint exports to ONNX (gathered to a full state dict) and passes the exporter's proof."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from graph_editor.model import save_graph

from ..helpers import tiny_cnn

pytestmark = pytest.mark.slow


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "studio", *args], capture_output=True, text=True, timeout=600)


def test_train_distributed_lists_one_run_and_exports_it(tmp_path):
    graph = tmp_path / "tiny.graph.json"
    save_graph(tiny_cnn(), graph)
    db = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    done = cli("train", str(graph), "--data", "digits", "--epochs", "2", "--batch-size", "32", "--device", "cpu",
               "--distributed", "ddp", "--nproc-per-node", "2", "--db", db)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "run 1 completed after 2 epoch(s)" in done.stdout

    listed = json.loads(cli("runs", "--db", db, "--json").stdout)
    assert [(r["id"], r["status"], r["epoch"]) for r in listed] == [(1, "completed", 2)]
    shown = json.loads(cli("show", "1", "--db", db, "--json").stdout)
    assert shown["spec"]["distributed"]["strategy"] == "ddp" and shown["spec"]["distributed"]["nproc_per_node"] == 2
    assert all(c["path"].endswith(".dcp") for c in shown["checkpoints"])

    exported = cli("export", "1", "--format", "onnx", "-o", str(tmp_path / "out"), "--db", db)
    assert exported.returncode == 0, exported.stderr[-3000:]
    assert list((tmp_path / "out").glob("*.onnx"))
