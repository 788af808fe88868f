"""One case of the training matrix (the cases: tests/trainer/matrix_cases.py; the tests:
test_training_matrix.py for one process and DDP, test_training_matrix_fsdp2.py for FSDP2, two files so
that `make test`'s two xdist workers, each taking whole files, share the matrix): each template family as
shipped, trained through the real worker (under torchrun with 2 CPU ranks on gloo for DDP and FSDP2) at
each precision, with channels_last on and off, eager and compiled. ``make test`` runs a pairwise-covering
subset (every level of each factor meets every level of every other); ``make test-thorough`` the whole
matrix.

Each case is one short epoch on a small seeded dataset with the template's own classes (1000 for the
ImageNet templates) and small inputs (3x32x32 images; the digits templates keep their 1x8x8 and 64
features): the run must finish, keep a whole last checkpoint that a one-process model loads, leave no
unfinished save behind, and compile once where asked. The shipped digits_cnn under DDP with
channels_last is the case that found the sharded writer refusing channels_last weights.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from graph_editor.building import build_module
from graph_editor.model import graph_from_dict, load_graph
from trainer.checkpoints.single_file import load_checkpoint_weights
from trainer.protocol.client import WorkerClient, environ_with
from trainer.store.runs import RunStore

from .helpers import ROOT, THOROUGH
from .matrix_cases import Case, every_case, pairwise_cases

TEMPLATES = ROOT / "assets" / "templates"
SAMPLES = 96           # 64 train (4 steps of 16), 10 val, 22 test
IMAGE = (3, 32, 32)
CASES = every_case() if THOROUGH else pairwise_cases()
EVENTS_S = 900         # a case's events may take this long (a large graph compiled in bf16 on a loaded CPU)


def params(cases: list[Case]) -> list:
    """``cases`` as pytest parameters, each allowed the time its events may take: pytest's own 600 s limit
    (pyproject) cut mobilenet_v2's compiled bf16 case at 600 s on 2 loaded cores, before its 900 s wait."""
    return [pytest.param(c, id=c.id, marks=pytest.mark.timeout(EVENTS_S + 180)) for c in cases]


def _dataset(folder: Path, template: str) -> Path:
    """A seeded .npz of SAMPLES samples in the template's input shape (images made 32x32) with its classes."""
    graph = load_graph(TEMPLATES / f"{template}.graph.json")
    shape = tuple(graph.input_spec.shape)
    if len(shape) == 3 and shape[1] > IMAGE[1]:
        shape = IMAGE
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, size=(SAMPLES, *shape)).astype(np.float32)
    y = np.arange(SAMPLES) % graph.num_classes
    path = folder / f"{template}.npz"
    np.savez(path, x=x, y=y, classes=np.array([f"c{i}" for i in range(graph.num_classes)]))
    return path


def _spec(folder: Path, case: Case) -> Path:
    spec = {"schema_version": 1, "name": case.id, "device": "cpu",
            "model": {"graph": str(TEMPLATES / f"{case.template}.graph.json")},
            "data": {"dataset": str(_dataset(folder, case.template)), "val_fraction": 0.1, "test_fraction": 0.2},
            "train": {"epochs": 1, "batch_size": 16, "metrics_interval_s": 0.1},
            "precision": {"dtype": case.precision, "compile": case.compile, "channels_last": case.channels_last},
            "distributed": {"strategy": case.strategy, **({"nproc_per_node": 2} if case.strategy != "none" else {})}}
    path = folder / "spec.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    return path


def check_case(case: Case, tmp_path: Path, inductor_cache: str) -> None:
    """Train ``case`` one short epoch through the real worker and check the run, the compile, the gathered
    last checkpoint and that no unfinished save is left."""
    db = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    env = environ_with(TORCHINDUCTOR_CACHE_DIR=inductor_cache, TORCHINDUCTOR_COMPILE_THREADS="1")
    with WorkerClient.run(_spec(tmp_path, case), db=db, env=env) as w:
        events = list(w.events(timeout=EVENTS_S))
        code = w.wait(120)
    assert code == 0, f"{case.id}: {w.stderr[-3000:]}"
    started, end = events[0], events[-1]
    assert started.event == "run_started" and started.precision == case.precision
    assert (started.distributed or {}).get("strategy", "none") == case.strategy
    assert end.event == "finished" and end.status == "completed" and math.isfinite(end.test_loss)
    losses = [e.loss for e in events if e.event == "metrics"]
    assert losses and all(math.isfinite(v) for v in losses)
    compiled = [e for e in events if e.event == "compile_done"]
    assert len(compiled) == (case.compile != "off")

    store = RunStore(db)
    assert store.run(1).status == "completed"
    last = Path(store.checkpoint_path(1, "last"))
    assert last.is_dir() == (case.strategy != "none")
    weights = load_checkpoint_weights(last)          # a sharded one gathered in this one process
    model = build_module(graph_from_dict(store.run(1).graph), device="cpu")   # the graph as run (its input)
    model.load_state_dict(weights)                   # every tensor, each of its parameter's shape
    assert not [p.name for p in last.parent.iterdir() if p.name.endswith(".tmp")]
