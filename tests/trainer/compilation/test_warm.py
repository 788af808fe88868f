"""Compile warm start: the index of compiled recipes, the progress events, and warming a template."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from trainer.compilation.cache import VARIABLE
from trainer.compilation.progress import CompileProgress
from trainer.compilation.recipes import WarmIndex, recipe_key
from trainer.protocol import events as ev
from trainer.protocol.client import WorkerClient, environ_with

from ..helpers import ROOT, tiny_cnn, write_spec


def test_the_index_knows_a_recipe_once_marked_and_an_unwritable_one_stays_first_time(tmp_path):
    index = WarmIndex(tmp_path)
    assert index.seconds("abc") is None
    index.mark("abc", 27.61, "digits_cnn")
    assert index.seconds("abc") == 27.61 and not list(index.folder.glob(".*tmp"))
    (index.folder / "bad.json").write_text("{not json")
    assert index.seconds("bad") is None                  # a damaged entry: first time, never a crash
    blocked = tmp_path / "file"
    blocked.write_text("")
    WarmIndex(blocked).mark("abc", 1.0, "x")             # cannot be a folder: nothing written, no error
    assert WarmIndex(blocked).seconds("abc") is None


def test_the_key_follows_what_changes_the_compiled_graphs_and_not_the_learning_rate():
    spec = {"train": {"batch_size": 64}, "precision": {"dtype": "fp32", "compile": "default"},
            "optim": {"name": "adamw", "lr": 0.003, "weight_decay": 5e-4}, "model": {"frozen": []}}
    key = recipe_key(spec, "g1", [1, 8, 8], "cpu", True)
    assert recipe_key({**spec, "optim": {**spec["optim"], "lr": 0.1}}, "g1", [1, 8, 8], "cpu", True) == key
    for other in (recipe_key({**spec, "train": {"batch_size": 32}}, "g1", [1, 8, 8], "cpu", True),
                  recipe_key(spec, "g2", [1, 8, 8], "cpu", True), recipe_key(spec, "g1", [1, 16, 16], "cpu", True),
                  recipe_key(spec, "g1", [1, 8, 8], "cpu", False),
                  recipe_key({**spec, "optim": {**spec["optim"], "weight_decay": 0.1}}, "g1", [1, 8, 8], "cpu", True),
                  recipe_key({**spec, "model": {"frozen": ["conv"]}}, "g1", [1, 8, 8], "cpu", True)):
        assert other != key


def test_progress_names_each_graph_and_backward_as_it_starts():
    events: list[ev.Event] = []
    now = [0.0]
    progress = CompileProgress(events.append, clock=lambda: now[0])
    dynamo, lazy = (SimpleNamespace(callback_trigger=SimpleNamespace(name=n)) for n in ("DYNAMO", "LAZY_BACKWARD"))
    progress.on_start(dynamo)
    now[0] = 9.5
    progress.on_end(dynamo)
    progress.on_start(lazy)
    progress.on_end(lazy)
    progress.on_start(dynamo)
    assert [(e.stage, e.compiled) for e in events] == [("graph 1", 0), ("backward 1", 1), ("graph 2", 2)]
    assert events[1].seconds == 9.5 and all(isinstance(e, ev.CompileProgress) for e in events)
    wire = ev.decode(json.loads(events[2].to_json()))
    assert isinstance(wire, ev.CompileProgress) and wire.stage == "graph 2"


@pytest.mark.slow
@pytest.mark.process
def test_a_warmed_graph_starts_its_first_run_warm(tmp_path):
    """The warm-up (``python -m trainer.compilation.warm``) compiles the worker's own step on synthetic
    images: a run of the same graph and recipe on the digits afterwards is told it is cached, and Inductor
    answers every graph of its first step from the cache (the forward, the backward, the optimizer's step)."""
    cache = tmp_path / "inductor"
    graph_spec = write_spec(tmp_path, tiny_cnn(), train={"epochs": 1, "batch_size": 32},
                            precision={"compile": "default"})
    graph = tmp_path / "net.graph.json"
    env = environ_with(**{VARIABLE: str(cache)})
    warmed = subprocess.run([sys.executable, "-m", "trainer.compilation.warm", str(graph), "--batch-size", "32"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert warmed.returncode == 0 and "net.graph.json: compiled in" in warmed.stdout, warmed.stderr[-3000:]
    assert len(list((cache / "warm").glob("*.json"))) == 1
    spec = json.loads(graph_spec.read_text())
    spec["data"] = {"dataset": "digits"}
    graph_spec.write_text(json.dumps(spec))
    with WorkerClient.run(graph_spec, db=f"sqlite:///{tmp_path / 'runs.db'}", env=env) as w:
        events = list(w.events(timeout=600))
        assert w.wait(60) == 0, w.stderr[-3000:]
    started = next(e for e in events if e.event == "run_started")
    assert started.compile_first_time is False and started.compile_expected_s > 0
    done = next(e for e in events if e.event == "compile_done")
    # The backward and the optimizer's graphs missed while the synthetic batches (gathered from an npz)
    # and the digits' reached the model with different strides on their one channel (trainer.data.loaders.
    # batch_layout): a cold cache answers none of the three.
    assert done.cache_misses == 0 and done.cache_hits >= 3, done
    assert os.path.isdir(cache)
