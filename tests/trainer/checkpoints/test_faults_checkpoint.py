"""A checkpoint is one atomic unit: a kill anywhere in a save leaves a store and checkpoints from which
``resume`` continues exactly where the last whole checkpoint was (issue 18, D1 and its "done when").

The worker is killed for real (SIGKILL): at each named point of the save sequence (the test hook
``TORCH_STUDIO_TEST_CHECKPOINT``), and at random moments of a run (6 kills; the issue's 20 with
``TORCH_STUDIO_TEST_THOROUGH=1``). Both compare their end with one uninterrupted run of the same spec.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from trainer.checkpoints.single_file import (
    FAULT_ENV,
    CheckpointError,
    checkpoint_file,
    discard_after,
    prune,
    save_checkpoint,
    verify_checkpoint,
)
from trainer.store.runs import RunStore

from ..helpers import THOROUGH, write_spec

pytestmark = pytest.mark.process

# 12 epochs: room for the random kills' resumes (one may get two epochs further before its kill)
# A save every epoch (every_s 0; by default a run this short writes once, at its end): kills to cut them.
SECTIONS = dict(train={"epochs": 12, "batch_size": 64, "metrics_interval_s": 0.1},
                optim={"name": "sgd", "lr": 0.05, "momentum": 0.9}, checkpoints={"every_s": 0})
RANDOM_KILLS = 20 if THOROUGH else 6


# ---------------------------------------------------------------- the file itself
def _tensors() -> dict[str, torch.Tensor]:
    return {"model.w": torch.arange(12.0).reshape(3, 4), "model.b": torch.tensor(1.5, dtype=torch.bfloat16),
            "rng.data": torch.arange(5, dtype=torch.uint8), "loop.empty": torch.zeros(0)}


def test_a_checkpoint_is_one_file_that_proves_itself(tmp_path):
    path = save_checkpoint(checkpoint_file(tmp_path, "last", 38), _tensors(), {"step": 38, "epoch": 2})
    assert [p.name for p in tmp_path.iterdir()] == ["last-00000038.safetensors"]   # no sidecar, no temp file
    tensors, meta = verify_checkpoint(path, step=38)
    assert meta["step"] == 38 and meta["meta_version"] == 3 and len(meta["checksum"]) == 64
    assert torch.equal(tensors["model.w"], _tensors()["model.w"]) and tensors["model.b"].dtype == torch.bfloat16
    with pytest.raises(CheckpointError, match="holds step 38, its record says step 19"):
        verify_checkpoint(path, step=19)


def test_a_damaged_or_truncated_checkpoint_is_named_not_loaded(tmp_path):
    path = save_checkpoint(tmp_path / "c.safetensors", _tensors(), {"step": 1})
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF                                   # one flipped bit in the tensor bytes
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="do not match their checksum"):
        verify_checkpoint(path)
    path.write_bytes(bytes(data[: len(data) // 2]))
    with pytest.raises(CheckpointError, match=r"c\.safetensors: not a complete checkpoint, truncated or corrupt"):
        verify_checkpoint(path)
    with pytest.raises(CheckpointError, match="no such checkpoint file"):
        verify_checkpoint(tmp_path / "gone.safetensors")


def test_a_version_1_checkpoint_with_its_sidecar_still_reads(tmp_path):
    from safetensors.torch import save_file

    save_file({"model.w": torch.ones(2)}, str(tmp_path / "last.safetensors"))
    (tmp_path / "last.json").write_text(json.dumps({"meta_version": 1, "step": 19, "epoch": 1}))
    tensors, meta = verify_checkpoint(tmp_path / "last.safetensors", step=19)
    assert meta["epoch"] == 1 and torch.equal(tensors["model.w"], torch.ones(2))
    with pytest.raises(CheckpointError, match="holds step 19, its record says step 38"):   # the old torn save
        verify_checkpoint(tmp_path / "last.safetensors", step=38)


def test_prune_keeps_the_newest_two_of_a_kind_and_removes_temporary_files(tmp_path):
    for step in (5, 40, 12, 7, 60):
        save_checkpoint(checkpoint_file(tmp_path, "last", step), _tensors(), {"step": step})
    save_checkpoint(checkpoint_file(tmp_path, "best", 5), _tensors(), {"step": 5})
    (tmp_path / ".last-00000041.safetensors.tmp").write_bytes(b"half")
    prune(tmp_path, "last", 40)          # just saved step 40; step 60 is not this save's to judge
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best-00000005.safetensors", "last-00000012.safetensors",
                                                           "last-00000040.safetensors", "last-00000060.safetensors"]
    discard_after(tmp_path, 12)          # a resume from step 12
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best-00000005.safetensors", "last-00000012.safetensors"]


# ---------------------------------------------------------------- the real worker, killed
def start(args: list[str], db: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """The worker as the studio starts it, with stdin open (commands) and events on stdout."""
    return subprocess.Popen([sys.executable, "-m", "trainer", *args, "--db", db], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})


def read_events(proc: subprocess.Popen) -> tuple[list[dict[str, Any]], str]:
    """The events of a worker run to its end, and its stderr."""
    out, err = proc.communicate(timeout=180)
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")], err


def expected_resume(db: str, run_id: int) -> tuple[int, int]:
    """What resume must continue from, found independently: the newest recorded 'last' checkpoint whose
    file verifies. Also checks the store is consistent: the run is not left running, every record
    names its own step."""
    store = RunStore(db, create=False)
    run = store.run(run_id)
    assert run.status in ("interrupted", "stopped", "completed"), run.status
    good = None
    for row in sorted(store.checkpoints(run_id), key=lambda c: c.step, reverse=True):
        if not Path(row.path).is_file():
            continue                                    # pruned: an older one
        try:
            _, meta = verify_checkpoint(row.path, step=row.step)
        except CheckpointError:
            continue
        assert row.kind in meta["kinds"] and meta["run_id"] == run_id
        if row.kind == "last" and good is None:
            good = (meta["step"], meta["epoch"])
    assert good is not None, "no whole last checkpoint left"
    store.close()
    return good


@pytest.fixture(scope="module")
def straight(tmp_path_factory) -> Iterator[Callable[[], dict[str, Any]]]:
    """The last event of one uninterrupted run of SECTIONS (in a store of its own), the end every killed
    and resumed run of this module must reach. It runs while the first test kills its worker (a second
    core is not idle meanwhile); the test asks for its end when it needs it."""
    folder = tmp_path_factory.mktemp("straight")
    proc = start(["run", str(write_spec(folder, **SECTIONS))], f"sqlite:///{folder / 'runs.sqlite'}")
    end: list[dict[str, Any]] = []

    def finished() -> dict[str, Any]:
        if not end:
            events, err = read_events(proc)
            assert proc.returncode == 0, err
            end.append(events[-1])
        return end[0]

    yield finished
    if proc.poll() is None:
        proc.kill()
        proc.communicate()


def assert_same_end(resumed: dict[str, Any], straight: dict[str, Any]) -> None:
    assert resumed["event"] == "finished" and resumed["status"] == "completed"
    assert resumed["step"] == straight["step"]
    assert resumed["test_loss"] == pytest.approx(straight["test_loss"], rel=1e-5)
    assert resumed["test_confusion"] == straight["test_confusion"]


def assert_store_has_each_step_once(db: str, run_id: int, epochs: int) -> None:
    store = RunStore(db, create=False)
    steps = [s for s, _, _ in store.metrics(run_id, "train/loss")]
    assert steps == sorted(set(steps)), "a step recorded twice (or out of order) after the resumes"
    assert [r["epoch"] for r in store.epoch_reports(run_id)] == list(range(1, epochs + 1))
    assert store.run(run_id).status == "completed"
    store.close()


def test_a_kill_at_each_point_of_the_save_sequence_then_resume(tmp_path, straight):
    """SIGKILL inside saves, one point after another on the same run; every resume starts at the
    last whole checkpoint, and the run ends exactly where an uninterrupted one does."""
    db = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    spec = write_spec(tmp_path, **SECTIONS)
    run_id, expected = None, 0
    for i, point in enumerate(("written", "torn", "renamed", "recorded", "pruned")):
        args = ["run", str(spec)] if run_id is None else ["resume", str(run_id)]
        # the first run dies in epoch 2's save (epoch 1 wrote its best and last as one file); resumes in
        # their first
        proc = start(args, db, {FAULT_ENV: f"kill:{point}:{2 if i == 0 else 1}"})
        events, err = read_events(proc)
        assert proc.returncode == -signal.SIGKILL, (point, err)
        if run_id is None:
            run_id = events[0]["run_id"]
        else:
            assert events[0]["event"] == "run_started" and events[0]["start_step"] == expected, point
        expected, _ = expected_resume(db, run_id)
    proc = start(["resume", str(run_id)], db)
    events, err = read_events(proc)
    assert proc.returncode == 0, err
    assert events[0]["start_step"] == expected
    assert_same_end(events[-1], straight())
    assert_store_has_each_step_once(db, run_id, SECTIONS["train"]["epochs"])
    folder = tmp_path / "runs" / f"run-{run_id}" / "checkpoints"
    assert not list(folder.glob(".*")), "a killed save's temporary file was left behind"
    assert len(list(folder.glob("last-*.safetensors"))) == 2


def test_a_run_killed_before_its_first_last_record_has_nothing_to_resume(tmp_path):
    """The exact sequence the random-kill test once met when it killed its first run at a random moment
    (0.19 s after run_started, under load still inside epoch 1): no 'last' record exists yet, so
    there is nothing to resume, and that is not a loss of data. Here deterministically: killed in
    epoch 1's 'last' save after the rename, before the record (its 'best' is recorded). The unrecorded
    file is never used; resume refuses, touches nothing, and the run reads interrupted."""
    db = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    proc = start(["run", str(write_spec(tmp_path, **SECTIONS))], db, {FAULT_ENV: "kill:renamed:2"})
    events, err = read_events(proc)
    assert proc.returncode == -signal.SIGKILL, err
    run_id = events[0]["run_id"]
    folder = tmp_path / "runs" / f"run-{run_id}" / "checkpoints"
    assert sorted(p.name for p in folder.iterdir()) == ["best-00000019.safetensors", "last-00000019.safetensors"]
    store = RunStore(db, create=False)
    assert [(c.kind, c.step) for c in store.checkpoints(run_id)] == [("best", 19)]
    store.close()
    with pytest.raises(AssertionError, match="no whole last checkpoint left"):
        expected_resume(db, run_id)
    proc = start(["resume", str(run_id)], db)
    events, err = read_events(proc)
    assert proc.returncode == 2 and [e["event"] for e in events] == ["failed"], err
    assert f"run {run_id} has no whole last checkpoint to resume from" in err
    store = RunStore(db, create=False)
    assert store.run(run_id).status == "interrupted" and len(store.checkpoints(run_id)) == 1
    store.close()
    assert (folder / "last-00000019.safetensors").is_file()      # a refused resume deletes nothing


@pytest.mark.slow
def test_kills_at_random_moments_then_resume_continues_exactly(tmp_path, straight):
    """The issue's "done when": SIGKILLs at random moments of one run (half of them while a save is
    paused at one of its points), each followed by a resume that starts at the last whole checkpoint;
    the run then ends exactly as an uninterrupted one. 6 kills in `make test` (3 inside saves, 3 at
    any moment), the issue's 20 over 12 epochs with TORCH_STUDIO_TEST_THOROUGH=1."""
    db = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    spec = write_spec(tmp_path, **SECTIONS)
    rng = random.Random(18)
    run_id, expected, in_saves = None, 0, 0
    pause = {FAULT_ENV: "pause:0.05"}       # saves take a few times longer: kills land inside them
    for i in range(RANDOM_KILLS):
        args = ["run", str(spec)] if run_id is None else ["resume", str(run_id)]
        proc = start(args, db, pause)
        first = json.loads(proc.stdout.readline())
        assert first["event"] == "run_started", proc.stderr.read() if proc.poll() is not None else first
        if run_id is None:               # a run killed before its first checkpoint has nothing to resume
            run_id = first["run_id"]
            while (e := json.loads(proc.stdout.readline()))["event"] != "checkpoint" or e["kind"] != "last":
                pass
        else:
            assert first["start_step"] == expected, i
        if i % 2:                            # at a save point: wait until the worker says it reached one
            for line in proc.stderr:
                if line.startswith("checkpoint-point") and rng.random() < 0.5:
                    time.sleep(rng.uniform(0, 0.04))
                    in_saves += 1
                    break
        else:
            time.sleep(rng.uniform(0.05, 0.8))
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        expected, _ = expected_resume(db, run_id)
    proc = start(["resume", str(run_id)], db)
    events, err = read_events(proc)
    assert proc.returncode == 0, err
    assert events[0]["start_step"] == expected
    assert_same_end(events[-1], straight())
    assert_store_has_each_step_once(db, run_id, SECTIONS["train"]["epochs"])
    assert in_saves >= max(2, RANDOM_KILLS // 4)      # at least half of the kills aimed at a save land in one
