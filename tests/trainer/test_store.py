"""The run store: a real SQLite file, read while written, schema version, interrupted runs, artifacts."""

from __future__ import annotations

import subprocess
import sys

import pytest
from sqlalchemy import text

from trainer.store import RunStore, StoreError, process_alive, run_to_dict


def make_run(store: RunStore) -> int:
    return store.create_run(name="r", spec={"a": 1}, graph={"nodes": []}, graph_hash="h", device="cpu", params=3)


def test_write_and_read_back(db):
    store = RunStore(db)
    rid = make_run(store)
    store.add_metrics(rid, [(1, "train/loss", 2.0), (2, "train/loss", 1.5), (2, "lr", 0.1)])
    store.add_checkpoint(rid, "last", "/nowhere/last.safetensors", 2, 1, None)
    art = store.add_artifact(rid, "onnx", "/x/model.onnx", {"opset": 18})
    store.finish(rid, "completed", summary={"test_accuracy": 0.9})
    other = RunStore(db)       # a second connection, as the GUI would open
    run = other.run(rid)
    assert run.status == "completed" and run.spec == {"a": 1} and run.summary["test_accuracy"] == 0.9
    assert other.metrics(rid, "train/loss") == [(1, "train/loss", 2.0), (2, "train/loss", 1.5)]
    assert other.artifacts(rid)[0].id == art and other.artifacts(rid)[0].meta == {"opset": 18}
    assert other.checkpoint_path(rid) is None   # the file does not exist
    assert run_to_dict(run)["ended_at"].endswith("Z")


def test_sqlite_is_in_wal_mode_and_readable_during_a_write(db):
    writer = RunStore(db)
    rid = make_run(writer)
    with writer.engine.connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        conn.commit()
        tx = conn.begin()
        conn.execute(text("INSERT INTO metrics (run_id, step, name, value) VALUES (:r, 9, 'x', 1.0)"), {"r": rid})
        # The writer holds an open transaction; a reader still reads (and does not see it yet).
        assert RunStore(db).metrics(rid) == []
        tx.commit()
    assert RunStore(db).metrics(rid) == [(9, "x", 1.0)]


def test_schema_version_from_the_future_is_refused(db):
    store = RunStore(db)
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE schema_info SET version = 99"))
    with pytest.raises(StoreError, match="schema version 99"):
        RunStore(db)


def test_running_run_of_a_dead_process_becomes_interrupted(db):
    store = RunStore(db)
    rid = make_run(store)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    store.update_run(rid, pid=dead.pid)
    assert not process_alive(dead.pid)
    assert store.run(rid).status == "interrupted"
    mine = make_run(store)     # this process is alive: its run stays running
    assert store.run(mine).status == "running"
    assert [r.status for r in store.runs()] == ["interrupted", "running"]


def test_env_var_selects_the_store(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'env.sqlite'}"
    monkeypatch.setenv("TORCH_STUDIO_DB", url)
    assert RunStore().url == url and (tmp_path / "env.sqlite").exists()
