"""The real worker process end to end: events against the store, commands, signals, resume, failures."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from graph_editor.building import build_module
from graph_editor.model import load_graph
from trainer.checkpoints.single_file import load_checkpoint_weights, verify_checkpoint
from trainer.protocol.client import WorkerClient
from trainer.protocol.events import PerClass
from trainer.store.runs import RunStore

from .helpers import DIGITS_CNN, kinds, run_worker, write_spec

pytestmark = pytest.mark.process


def until(events, name, count=1):
    """Consume events up to and including the ``count``-th ``name``; returns everything consumed."""
    seen = []
    for e in events:
        seen.append(e)
        if sum(x.event == name for x in seen) == count:
            return seen
    raise AssertionError(f"the stream ended before {count} '{name}' events: {kinds(seen)}")


def test_digits_cnn_end_to_end_events_match_the_store(tmp_path, db):
    spec = write_spec(tmp_path, DIGITS_CNN, train={"epochs": 2})
    t0 = time.monotonic()
    code, events, stderr = run_worker(spec, db)
    elapsed = time.monotonic() - t0
    assert code == 0, stderr
    names = kinds(events)
    assert names[0] == "run_started" and names[-1] == "finished"
    assert names.count("epoch_end") == 2 and "memory" in names and "checkpoint" in names
    assert len(events) / elapsed < 15   # throttled at the source (startup time included in elapsed)
    started, finished = events[0], events[-1]
    assert started.params == 94410 and started.device == "cpu" and started.steps_per_epoch == 19
    metrics = [e for e in events if e.event == "metrics"]
    steps = [e.step for e in metrics]
    assert steps == sorted(steps) and steps[0] == 1 and steps[-1] == 38   # the curves start at step 1
    end = [e for e in events if e.event == "epoch_end"][-1]
    assert len(end.confusion) == 10 and sum(map(sum, end.confusion)) == started.val_size
    assert isinstance(end.per_class, PerClass) and len(end.per_class) == 10
    assert finished.status == "completed" and finished.test_accuracy > 0.8

    store = RunStore(db)
    run = store.run(started.run_id)
    assert run.status == "completed" and run.params == 94410 and run.epoch == 2 and run.step == 38
    assert run.summary["test_accuracy"] == pytest.approx(finished.test_accuracy)
    stored_loss = {s: v for s, _, v in store.metrics(run.id, "train/loss")}
    assert {e.step: e.loss for e in metrics} == pytest.approx(stored_loss)
    reports = store.epoch_reports(run.id)
    assert [r["epoch"] for r in reports] == [1, 2] and reports[-1]["confusion"] == end.confusion
    assert run.graph["num_classes"] == 10 and len(run.graph_hash) == 64
    assert run.spec["model"]["graph"] == run.graph

    best = store.checkpoint_path(run.id, "best")
    weights = load_checkpoint_weights(best)
    model = build_module(load_graph(DIGITS_CNN))
    model.load_state_dict(weights)   # keys are the graph's node ids
    _, meta = verify_checkpoint(best)   # one file: tensors, metadata and their checksum
    row = [c for c in store.checkpoints(run.id) if c.kind == "best"][-1]
    assert meta["step"] == row.step and "best" in meta["kinds"] and best.name == f"best-{row.step:08d}.safetensors"


def test_commands_pause_set_lr_resume_stop(tmp_path, db):
    spec = write_spec(tmp_path, train={"epochs": 200}, schedule={"name": "constant"})
    with WorkerClient.run(spec, db=db) as w:
        stream = w.events(timeout=60)
        run_id = until(stream, "metrics")[0].run_id
        assert w.pause()
        seen = until(stream, "state")
        assert seen[-1].state == "paused"
        assert w.set_lr(0.0123)
        store, deadline = RunStore(db), time.monotonic() + 60
        while not store.metrics(run_id, "lr/set") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert store.metrics(run_id, "lr/set")   # the paused worker has taken the command in...
        assert w.poll() == []             # ...and, paused, trained nothing and emitted nothing
        assert w.resume_training()
        assert next(stream).state == "running"
        after = until(stream, "metrics", 2)   # the first one still holds the step made before the pause
        assert after[-1].lr == pytest.approx(0.0123)
        assert w.stop()
        rest = list(stream)
        assert w.wait(60) == 0
    assert [e.state for e in rest if e.event == "state"] == ["stopping"]
    assert rest[-1].event == "finished" and rest[-1].status == "stopped"
    assert any(e.event == "checkpoint" and e.kind == "last" for e in rest)
    assert RunStore(db).run(rest[-1].run_id).status == "stopped"
    run_id, first_seconds = rest[-1].run_id, rest[-1].seconds
    set_at = [(s, v) for s, _n, v in RunStore(db).metrics(run_id, "lr/set")]
    assert len(set_at) == 1 and set_at[0][1] == pytest.approx(0.0123)   # the rate set by hand, kept with its step
    time.sleep(3)                                                       # the gap between the stop and the resume
    with WorkerClient.resume(run_id, db=db) as w:
        stream = w.events(timeout=60)
        resumed = until(stream, "metrics", 2)
        w.stop()
        resumed += list(stream)
        assert w.wait(60) == 0, w.stderr
    store = RunStore(db)
    run = store.run(run_id)
    # The run's clock goes on from the checkpoint (it restarted at 0), and leaves the gap out
    clock = [v for _s, _n, v in store.metrics(run_id, "time")]
    assert clock == sorted(clock)
    second_part = (run.ended_at - run.started_at).total_seconds() - first_seconds
    assert first_seconds < resumed[-1].seconds == run.summary["seconds"] < second_part
    assert [e.lr for e in resumed if e.event == "metrics"][-1] == pytest.approx(0.0123)
    # A peak is never below the resident memory of the same sample (the kernel's high-water mark trails)
    for e in (e for e in resumed if e.event == "memory"):
        assert e.peak_rss >= e.rss


def test_sigterm_saves_a_checkpoint_and_ends_cleanly(tmp_path, db):
    spec = write_spec(tmp_path, train={"epochs": 2000})   # killed long before its end
    with WorkerClient.run(spec, db=db) as w:
        stream = w.events(timeout=60)
        first = until(stream, "metrics")
        w.terminate()
        rest = list(stream)
        assert w.wait(60) == 0
    assert rest[-1].event == "finished" and rest[-1].status == "stopped"
    store = RunStore(db)
    assert store.run(first[0].run_id).status == "stopped"
    assert store.checkpoint_path(first[0].run_id, "last") is not None


def test_closed_stdout_does_not_stop_training(tmp_path, db):
    spec = write_spec(tmp_path, train={"epochs": 3})
    proc = subprocess.Popen([sys.executable, "-m", "trainer", "run", str(spec), "--db", db], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = json.loads(proc.stdout.readline())
    proc.stdout.close()                   # the GUI went away
    proc.stdin.close()
    err = proc.stderr.read()
    assert proc.wait(120) == 0, err
    run = RunStore(db).run(first["run_id"])
    assert run.status == "completed" and run.epoch == 3


def test_kill_9_keeps_written_metrics_and_marks_the_run_interrupted(tmp_path, db):
    spec = write_spec(tmp_path, train={"epochs": 2000})   # killed long before its end
    with WorkerClient.run(spec, db=db) as w:
        stream = w.events(timeout=60)
        seen = until(stream, "checkpoint")   # written every_s (5 s) of the run, by default
        seen += until(stream, "epoch_end")   # then an epoch whose checkpoint is held, not written
        os.kill(w.proc.pid, signal.SIGKILL)
        w.wait(30)
    run_id = seen[0].run_id
    store = RunStore(db)                  # reopen, as the studio would after the crash
    run = store.run(run_id)
    assert run.status == "interrupted" and "ended without finishing" in run.error
    stored = {s for s, _, _ in store.metrics(run_id, "train/loss")}
    assert {e.step for e in seen if e.event == "metrics"} <= stored
    assert len(store.epoch_reports(run_id)) >= 2
    written = [e for e in seen if e.event == "checkpoint" and e.kind == "last"]
    assert str(store.checkpoint_path(run_id, "last")) == written[-1].path and written[-1].step < seen[-1].step


def test_resume_ends_at_the_metrics_of_an_uninterrupted_run(tmp_path):
    sections = dict(train={"epochs": 3, "batch_size": 32}, data={"augment": {"translate": 1}},
                    optim={"name": "sgd", "lr": 0.05, "nesterov": True})
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    db_a, db_b = f"sqlite:///{tmp_path / 'a.sqlite'}", f"sqlite:///{tmp_path / 'b.sqlite'}"
    # the uninterrupted run goes alongside the stopped and resumed one (a store of its own; its client's
    # reader thread keeps its events): the processes' seconds of start-up overlap on a second core
    with WorkerClient.run(write_spec(tmp_path / "a", **sections), db=db_a) as a:
        with WorkerClient.run(write_spec(tmp_path / "b", **sections), db=db_b) as w:
            stream = w.events(timeout=60)
            until(stream, "epoch_end")
            until(stream, "metrics")          # stop in the middle of epoch 2
            w.stop()
            first_part = list(stream)
        assert first_part[-1].status == "stopped"
        stopped_at = first_part[-1].step
        assert 39 < stopped_at < 117
        with WorkerClient.resume(first_part[-1].run_id, db=db_b) as w:
            resumed = list(w.events(timeout=60))
            assert w.wait(60) == 0, w.stderr
        straight = list(a.events(timeout=60))
        assert a.wait(60) == 0, a.stderr
    assert resumed[0].event == "run_started" and resumed[0].start_step == stopped_at
    assert resumed[0].run_id == first_part[-1].run_id
    a_end, b_end = straight[-1], resumed[-1]
    assert b_end.status == "completed" and b_end.step == a_end.step == 117
    last_a = [e for e in straight if e.event == "epoch_end"][-1]
    last_b = [e for e in resumed if e.event == "epoch_end"][-1]
    for key in ("train_loss", "train_accuracy", "val_loss", "val_accuracy"):
        assert getattr(last_b, key) == pytest.approx(getattr(last_a, key), rel=1e-5, abs=1e-7), key
    assert b_end.test_loss == pytest.approx(a_end.test_loss, rel=1e-5)
    assert b_end.test_confusion == a_end.test_confusion
    assert RunStore(db_b).run(b_end.run_id).status == "completed"


def test_nan_loss_fails_naming_the_step(tmp_path, db):
    spec = write_spec(tmp_path, optim={"name": "sgd", "lr": 1e12, "momentum": 0.9}, schedule={"name": "constant"},
                      train={"epochs": 5})
    code, events, stderr = run_worker(spec, db)
    assert code == 1
    failed = events[-1]
    assert failed.event == "failed" and failed.kind == "nan"
    assert isinstance(failed.step, int) and f"at step {failed.step}" in failed.message
    run = RunStore(db).run(failed.run_id)
    assert run.status == "failed" and run.error_kind == "nan" and f"step {failed.step}" in run.error
    assert "Traceback" not in stderr


def test_out_of_memory_fails_with_the_memory_figures(tmp_path, db, monkeypatch, capsys):
    """A CUDA OOM cannot happen here; the worker's handling of the exception is exercised in-process."""
    import io

    from trainer import worker
    from trainer.checks import setup
    from trainer.protocol import events as ev
    from trainer.spec import load_spec

    def oom(_job):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(worker, "run_epochs", oom)
    monkeypatch.setattr(worker.Controls, "install_sigterm", lambda self: None)
    st = setup(load_spec(write_spec(tmp_path)))
    model = worker.build_model(st)
    store = RunStore(db)
    rid = store.create_run(name="oom", spec={}, graph={}, graph_hash="", device="cpu", params=1)
    out = io.StringIO()
    code = worker.execute(st, model, store, ev.Emitter(out), rid, tmp_path / "run", checkpoint=None)
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert code == 1 and events[-1]["kind"] == "oom" and "memory" in events[-1]
    assert "Tried to allocate 2.00 GiB" in events[-1]["message"]
    assert store.run(rid).error_kind == "oom"


def test_csv_data_over_the_device_budget_streams_through_a_dataloader(tmp_path, db):
    from .helpers import tiny_mlp

    rng = np.random.default_rng(0)
    rows = ["x1,x2,colour,label"]
    for _ in range(300):
        a, b = rng.normal(size=2)
        colour = rng.choice(["red", "blue"])
        rows.append(f"{a:.4f},{b:.4f},{colour},{'pos' if a + b + (colour == 'red') > 0.5 else 'neg'}")
    (tmp_path / "table.csv").write_text("\n".join(rows) + "\n")
    spec = write_spec(tmp_path, tiny_mlp(features=4, classes=2), train={"epochs": 3, "batch_size": 16},
                      data={"dataset": "table.csv", "device_budget_mb": 0, "workers": 1}, optim={"lr": 0.01})
    code, events, stderr = run_worker(spec, db)
    assert code == 0, stderr
    assert events[0].classes == ["neg", "pos"] and events[-1].status == "completed"
    assert events[-1].test_accuracy > 0.7


def test_image_folder_with_its_own_splits_trains_and_its_validation_is_predicted_again(tmp_path, db):
    from PIL import Image

    from trainer.metrics.confusion_cells import predict_validation

    from .helpers import tiny_cnn

    rng = np.random.default_rng(0)
    for split, n in (("train", 24), ("val", 6), ("test", 8)):
        for c, name in enumerate(("dark", "light")):
            (tmp_path / "shapes" / split / name).mkdir(parents=True)
            for i in range(n):
                pixels = rng.integers(0, 90, (8, 8)) + 150 * c
                Image.fromarray(pixels.astype(np.uint8), "L").save(tmp_path / "shapes" / split / name / f"{i}.png")
    spec = write_spec(tmp_path, tiny_cnn(classes=2), train={"epochs": 2, "batch_size": 8},
                      data={"dataset": "shapes"})
    code, events, stderr = run_worker(spec, db)
    assert code == 0, stderr
    last_epoch = [e for e in events if e.event == "epoch_end"][-1]
    finished = events[-1]
    assert sum(map(sum, last_epoch.confusion)) == 12 and sum(map(sum, finished.test_confusion)) == 16
    last = [e for e in events if e.event == "checkpoint" and e.kind == "last"][-1]
    found = predict_validation(json.loads(spec.read_text()), last.path, base_dir=tmp_path)
    assert found.images.shape == (12, 1, 8, 8) and found.rows.tolist() == list(range(12))
    assert found.matrix().tolist() == last_epoch.confusion     # the worker's own validation, sample for sample
    # each epoch's share of its training time spent getting batches from the loader's workers
    waits = RunStore(db).metrics(finished.run_id, "data/wait")
    ends = [e.step for e in events if e.event == "epoch_end"]
    assert [s for s, _, _ in waits] == ends and all(0.0 <= v <= 1.0 for _, _, v in waits), waits


def test_the_studios_prediction_is_the_run_started_peak_and_a_bad_one_is_refused(tmp_path, db):
    """``--predicted-peak`` (what the Train dialog predicted): the gate takes it, run_started reports it."""
    spec = write_spec(tmp_path, memory={"budget_mb": 512})
    with WorkerClient(["run", str(spec), "--db", db, "--predicted-peak", "4242"]) as w:
        started = next(e for e in w.events(timeout=60) if e.event == "run_started")
        w.stop()
        assert w.wait(60) == 0
    assert started.predicted_peak == 4242     # its own prediction would be megabytes
    with WorkerClient(["run", str(spec), "--db", db, "--predicted-peak", "-1"]) as w:
        events = list(w.events(timeout=60))
        assert w.wait(60) != 0
    assert events[-1].event == "failed" and events[-1].kind == "spec" and "--predicted-peak" in events[-1].message


@pytest.mark.slow
def test_run_started_says_what_this_cpu_s_bf16_kernels_may_add_to_the_gate_s_peak(tmp_path, db):
    """bf16 on a CPU with native bf16 kernels: the gate's prediction leaves oneDNN's buffers out, and
    run_started carries their bound beside the peak (the dashboard's line says it)."""
    from trainer.memory.prediction import native_bf16_cpu

    spec = write_spec(tmp_path, memory={"budget_mb": 512}, precision={"dtype": "bf16"})
    with WorkerClient(["run", str(spec), "--db", db]) as w:
        started = next(e for e in w.events(timeout=60) if e.event == "run_started")
        w.stop()
        assert w.wait(60) == 0
    params = started.params
    assert started.predicted_peak > 0
    assert started.predicted_unmodelled == (2 * 4 * params if native_bf16_cpu("cpu", "bf16") else 0)
