"""``torch-studio train / runs / show`` through the real entry point and the real worker."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from graph_editor.model import save_graph
from tests.trainer.helpers import tiny_cnn

pytestmark = pytest.mark.process


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


def test_reading_commands_say_a_store_does_not_exist_and_create_nothing(tmp_path):
    typo = tmp_path / "tpyo" / "runs.sqlite"
    for args in (("runs",), ("show", "1"), ("export", "1", "--format", "onnx", "-o", str(tmp_path / "out"))):
        done = cli(*args, "--db", f"sqlite:///{typo}")
        assert done.returncode == 1 and "no run store at" in done.stderr and "Traceback" not in done.stderr, args
    assert not (tmp_path / "tpyo").exists()
    (tmp_path / "garbage.sqlite").write_bytes(b"not a database at all" * 100)
    for args in (("runs",), ("show", "1")):
        done = cli(*args, "--db", f"sqlite:///{tmp_path / 'garbage.sqlite'}")
        assert done.returncode == 1 and "is not a SQLite database" in done.stderr, args
        assert "Traceback" not in done.stderr


def test_ctrl_c_twice_stops_the_run_cleanly(tmp_path):
    """A terminal's Ctrl-C reaches the CLI and the worker (one process group); two presses 0.1 s apart."""
    import os
    import signal
    import time

    graph = tmp_path / "tiny.graph.json"
    save_graph(tiny_cnn(), graph)
    proc = subprocess.Popen([sys.executable, "-m", "studio", "train", str(graph), "--epochs", "200", "--device", "cpu",
                             "--db", f"sqlite:///{tmp_path / 'runs.sqlite'}"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    seen = ""
    for line in proc.stderr:          # without a terminal the bar prints a line per epoch
        seen += line
        if line.startswith("epoch 1/200"):
            break
    os.killpg(proc.pid, signal.SIGINT)
    time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    err = seen + err
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert "stopped after" in out and "stopping: the run saves a checkpoint first" in err


def test_train_on_an_image_folder_streams_it_and_skips_a_corrupt_file(tmp_path):
    # The command line wrote a version 1 spec, which reads an image folder whole into memory (the old
    # behaviour, kept for old specs): one corrupt file refused the whole run ("bad run spec: ... not a
    # readable image"), found on a GPU machine with a folder of 3,000 JPEGs.
    from tests.trainer.image_files import corrupt, write_folder

    folder = tmp_path / "images"
    files = write_folder(folder, classes=3, per_class=12, size=(16, 16))
    bad = corrupt(files[15])
    graph = tmp_path / "tiny.graph.json"
    save_graph(tiny_cnn(channels=3, size=16, classes=3), graph)
    db = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    done = cli("train", str(graph), "--data", str(folder), "--epochs", "1", "--batch-size", "8", "--device", "cpu",
               "--db", db)
    assert done.returncode == 0, done.stderr
    shown = json.loads(cli("show", "1", "--db", db, "--json").stdout)
    assert shown["spec"]["data"]["images"]["source"] == "auto"
    assert shown["final_metrics"]["data/skipped_files"]["value"] == 1.0, (shown["final_metrics"], str(bad))
