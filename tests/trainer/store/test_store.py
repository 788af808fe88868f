"""The run store: a real SQLite file, read while written, schema version, interrupted runs, artifacts."""

from __future__ import annotations

import subprocess
import sys

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from trainer.store.liveness import process_alive
from trainer.store.runs import RunStore, StoreError, run_to_dict


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


@pytest.mark.process
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


def test_a_pid_given_to_another_process_does_not_keep_a_dead_run_running(db):
    store = RunStore(db)
    rid = make_run(store)
    run = store.run(rid)
    if not run.pid_started:
        pytest.skip("this system does not say when a process started")
    assert process_alive(run.pid, run.pid_started) and run.status == "running"
    # The run's worker died and its pid now belongs to another process (here: this one, started later).
    store.update_run(rid, pid_started=run.pid_started - 1)
    assert not process_alive(run.pid, run.pid_started - 1)
    assert store.run(rid).status == "interrupted"


def test_a_version_1_store_is_upgraded_in_place_and_keeps_its_runs(db):
    store = RunStore(db)
    rid = make_run(store)
    store.finish(rid, "completed")
    with store.engine.begin() as conn:           # the store as the first schema wrote it
        for column in ("pid_started", "tags", "notes"):
            conn.execute(text(f"ALTER TABLE runs DROP COLUMN {column}"))
        conn.execute(text("UPDATE schema_info SET version = 1"))
    store.close()
    upgraded = RunStore(db)
    with upgraded.engine.connect() as conn:
        assert conn.execute(text("SELECT version FROM schema_info")).scalar() == 3
    old = upgraded.run(rid)
    assert old.status == "completed" and old.pid_started == 0 and old.tags == [] and old.notes == ""
    upgraded.update_run(rid, tags=["study:s", "trial:0"], notes="lr too high")
    assert (upgraded.run(rid).tags, upgraded.run(rid).notes) == (["study:s", "trial:0"], "lr too high")
    assert upgraded.run(make_run(upgraded)).status == "running"
    RunStore(db).close()                          # opening it again changes nothing


def test_env_var_selects_the_store(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'env.sqlite'}"
    monkeypatch.setenv("TORCH_STUDIO_DB", url)
    assert RunStore().url == url and (tmp_path / "env.sqlite").exists()


def _fill(store: RunStore, run_dir: str) -> int:
    rid = store.create_run(name="r", spec={}, graph={"nodes": []}, graph_hash="h", device="cpu", params=1,
                           run_dir=run_dir)
    store.add_metrics(rid, [(1, "train/loss", 2.0), (2, "val/accuracy", 0.5)])
    store.add_epoch_report(rid, 1, {"confusion": [[1]]})
    store.add_checkpoint(rid, "best", f"{run_dir}/checkpoints/best.safetensors", 2, 1, 0.5)
    store.add_artifact(rid, "onnx", f"{run_dir}/model.onnx")
    store.finish(rid, "completed")
    return rid


def test_delete_run_removes_the_run_and_all_its_rows_and_only_those(db):
    store = RunStore(db)
    gone, kept = _fill(store, "runs/one"), _fill(store, "runs/two")
    assert store.delete_run(gone) == "runs/one"
    other = RunStore(db)   # what another connection sees: the delete is committed
    assert [r.id for r in other.runs()] == [kept]
    assert other.metrics(gone) == [] and other.epoch_reports(gone) == []
    assert other.checkpoints(gone) == [] and other.artifacts(gone) == []
    assert len(other.metrics(kept)) == 2 and len(other.epoch_reports(kept)) == 1
    assert len(other.checkpoints(kept)) == 1 and len(other.artifacts(kept)) == 1
    with pytest.raises(StoreError, match=f"no run {gone} in"):
        store.delete_run(gone)
    with pytest.raises(StoreError, match="no run 999 in"):
        store.delete_run(999)


def test_delete_run_is_one_transaction(db):
    store = RunStore(db)
    rid = _fill(store, "runs/one")
    with store.engine.begin() as conn:   # the last statement (the run row) fails...
        conn.execute(text("CREATE TRIGGER keep_runs BEFORE DELETE ON runs BEGIN SELECT RAISE(ABORT, 'kept'); END"))
    with pytest.raises(DBAPIError, match="kept"):
        store.delete_run(rid)
    # ...so the rows deleted before it in the same transaction are all back
    assert store.run(rid).status == "completed" and len(store.metrics(rid)) == 2
    assert len(store.epoch_reports(rid)) == 1 and len(store.checkpoints(rid)) == 1 and len(store.artifacts(rid)) == 1


def test_a_reader_never_writes_a_database_that_is_not_a_run_store_yet(tmp_path):
    """``create=False`` (the reading commands, the studio's and the tests' polls) on a database another
    process is still making, or someone's own SQLite file: refused, and the file is left as it was."""
    import sqlite3

    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE notes (body TEXT)")
    before = path.read_bytes()
    with pytest.raises(StoreError, match="no run store in this database"):
        RunStore(f"sqlite:///{path}", create=False)
    with sqlite3.connect(path) as con:
        assert [r[0] for r in con.execute("SELECT name FROM sqlite_master")] == ["notes"]
    assert path.read_bytes()[:100] == before[:100]

    made = RunStore(f"sqlite:///{tmp_path / 'runs.sqlite'}")        # tables made, the version row not yet
    with made.engine.begin() as con:
        con.execute(text("DELETE FROM schema_info"))
    with pytest.raises(StoreError, match="still being made"):
        RunStore(made.url, create=False)
    with made.engine.connect() as con:
        assert con.execute(text("SELECT count(*) FROM schema_info")).scalar() == 0


@pytest.mark.process
def test_opening_a_second_store_keeps_the_first_ones_locks(tmp_path):
    """A process with a store open that opens another (a sweep: the run store, Optuna's storage, a
    third) keeps its SQLite locks: another process closing the last connection it knows of must not take
    the WAL for unused and remove it under the first store (runs were lost, "disk I/O error")."""
    url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    first = RunStore(url)
    kw = {"spec": {}, "graph": {}, "graph_hash": "h", "device": "cpu", "params": 1}
    a = first.create_run(name="a", **kw)
    RunStore(url).close()
    reader = ("import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('SELECT count(*) FROM runs')"
              ".fetchone(); c.close()")
    subprocess.run([sys.executable, "-c", reader, str(tmp_path / "runs.sqlite")], check=True, timeout=60)
    b = first.create_run(name="b", **kw)
    assert sorted(r.id for r in RunStore(url).runs()) == [a, b]


def test_stores_opened_at_once_on_a_new_file_all_open(tmp_path):
    """Two sweeps (or a sweep and its first worker) making one new store at the same moment: both found
    no tables, and the second's CREATE TABLE failed ("table schema_info already exists", in 29 of 30
    rounds of three). Threads stand in for the processes: SQLite's lock is the same between connections."""
    import threading

    for round_ in range(4):
        url = f"sqlite:///{tmp_path / f'runs{round_}.sqlite'}"
        start, errors = threading.Barrier(3), []

        def open_store(url: str = url, start: threading.Barrier = start, errors: list[str] = errors) -> None:
            start.wait()
            try:
                RunStore(url).close()
            except StoreError as exc:
                errors.append(str(exc))

        threads = [threading.Thread(target=open_store) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        with RunStore(url).engine.connect() as conn:
            assert conn.execute(text("SELECT version FROM schema_info")).scalars().all() == [3]
