"""The run store under faults (issue 18): bad URLs and files, a typo in a path, a read-only store, a
full disk, another process holding the write lock. A real SQLite file each time; read-only media and
a full disk are real mounts (a mount namespace of their own), skipped where the system allows none."""

from __future__ import annotations

import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from trainer.protocol import events as ev
from trainer.store.runs import RETRY_ENV, RunStore, StoreError, StoreReadOnly
from trainer.worker import run_spec_file

from ..helpers import write_spec

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[3]


def make_run(store: RunStore, pid: int | None = None) -> int:
    rid = store.create_run(name="r", spec={}, graph={"nodes": []}, graph_hash="h", device="cpu", params=1)
    if pid is not None:
        store.update_run(rid, pid=pid)
    return rid


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def bad_stores(tmp_path: Path) -> dict[str, tuple[str, str]]:
    """URL -> (what it is, what the error must say)."""
    (tmp_path / "garbage.sqlite").write_bytes(os.urandom(3000))
    good = tmp_path / "good.sqlite"
    store = RunStore(f"sqlite:///{good}")
    for _ in range(3):
        store.add_metrics(make_run(store), [(i, "train/loss", float(i)) for i in range(300)])
    store.close()
    data = good.read_bytes()
    (tmp_path / "half.sqlite").write_bytes(data[: len(data) // 2])
    return {
        "foo://": ("an unknown kind", "unknown database kind 'foo'"),
        "mysql://user@localhost/runs": ("no driver", "driver is not installed"),
        "postgresql://user@127.0.0.1:1/runs": ("no server there", "cannot open the run store (connection"),
        "runs": ("a bare word", "is not a database URL"),
        f"sqlite:///{tmp_path}": ("a folder", "is a folder, not a run store file"),
        f"sqlite:///{tmp_path / 'garbage.sqlite'}": ("garbage", "is not a SQLite database"),
        f"sqlite:///{tmp_path / 'half.sqlite'}": ("half a file", "malformed"),
    }


def test_bad_store_urls_and_files_are_refused_naming_the_url(tmp_path):
    for url, (what, says) in bad_stores(tmp_path).items():
        with pytest.raises(StoreError) as info:
            RunStore(url).runs()
        assert says in str(info.value) and url.split("/")[0] in str(info.value), what


def assert_refused(code: int, out: str, err: str, url: str) -> None:
    """Exit 2, one ``failed`` event naming --db, one line on stderr and no traceback."""
    events = [json.loads(line) for line in out.splitlines()]
    assert code == 2, (url, err)
    assert [e["event"] for e in events] == ["failed"], url
    assert events[0]["problems"] and events[0]["problems"][0].startswith("--db:"), url
    assert "Traceback" not in err and err.startswith("error: --db:"), (url, err)


def test_the_worker_refuses_each_bad_store_before_it_starts(tmp_path, capsys):
    """Each bad store through the worker's own run_spec_file; two of them (a URL and a file refused) through
    the real worker process, for the exit status and the streams a caller reads (a process costs
    seconds of imports, and all seven take the one path from RunStore's StoreError to the refusal)."""
    spec = write_spec(tmp_path)
    bad = bad_stores(tmp_path)
    real = ("foo://", f"sqlite:///{tmp_path / 'half.sqlite'}")
    procs = {url: subprocess.Popen([sys.executable, "-m", "trainer", "run", str(spec), "--db", url],
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for url in real}
    for url in bad:
        out = io.StringIO()
        code = run_spec_file(str(spec), db=url, run_dir=None, emitter=ev.Emitter(out))
        assert_refused(code, out.getvalue(), capsys.readouterr().err, url)
    for url, proc in procs.items():
        out, err = proc.communicate(timeout=300)
        assert_refused(proc.returncode, out, err, url)


def test_a_typo_in_a_store_path_creates_nothing_for_a_reader(tmp_path):
    url = f"sqlite:///{tmp_path / 'typo' / 'runz.sqlite'}"
    with pytest.raises(StoreError, match="no run store at .*runz.sqlite"):
        RunStore(url, create=False)
    assert not (tmp_path / "typo").exists()
    RunStore(url).close()                 # a writer (the worker's first run) creates it
    assert (tmp_path / "typo" / "runz.sqlite").is_file()


def test_reading_never_writes_a_dead_run_reads_interrupted(tmp_path):
    url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    store = RunStore(url)
    rid = make_run(store, pid=dead_pid())
    mine = make_run(store)
    before = (tmp_path / "runs.sqlite").read_bytes(), (tmp_path / "runs.sqlite-wal").read_bytes()
    assert [r.status for r in store.runs()] == ["interrupted", "running"]
    assert store.run(rid).status == "interrupted" and "ended without finishing" in store.run(rid).error
    assert before == ((tmp_path / "runs.sqlite").read_bytes(), (tmp_path / "runs.sqlite-wal").read_bytes())
    assert store.mark_interrupted() == [rid]          # a writer records it
    assert store.run(mine).status == "running"


def test_a_write_waits_out_another_process_holding_the_lock(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_STUDIO_DB_BUSY_MS", "100")     # SQLite gives up fast; the store retries
    path = tmp_path / "runs.sqlite"
    store = RunStore(f"sqlite:///{path}")
    rid = make_run(store)
    held = threading.Event()

    def hold(seconds: float) -> None:
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")               # the write lock, as another process would take it
        held.set()
        time.sleep(seconds)
        conn.execute("ROLLBACK")
        conn.close()

    t = threading.Thread(target=hold, args=(1.5,))
    t.start()
    held.wait()
    t0 = time.monotonic()
    store.add_metrics(rid, [(1, "train/loss", 0.5)])
    store.add_checkpoint(rid, "last", "x", 1, 1, None)
    assert time.monotonic() - t0 > 1.0 and store.metrics(rid) == [(1, "train/loss", 0.5)]
    t.join()
    monkeypatch.setenv(RETRY_ENV, "0.3")               # a lock held beyond the retries: said, not a driver error
    held.clear()
    t = threading.Thread(target=hold, args=(1.5,))
    t.start()
    held.wait()
    with pytest.raises(StoreError, match="held the run store's lock too long; cannot record metrics"):
        store.add_metrics(rid, [(2, "train/loss", 0.4)])
    t.join()


def test_a_run_survives_the_store_locked_by_another_process_and_keeps_every_metric(tmp_path):
    path = tmp_path / "runs.sqlite"
    spec = write_spec(tmp_path, train={"epochs": 4, "metrics_interval_s": 0.1})
    proc = subprocess.Popen([sys.executable, "-m", "trainer", "run", str(spec), "--db", f"sqlite:///{path}"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "TORCH_STUDIO_DB_BUSY_MS": "200"})
    events = [json.loads(proc.stdout.readline())]
    assert events[0]["event"] == "run_started", proc.stderr.read()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")                   # 3 s of lock: 15 times SQLite's own wait
    time.sleep(3)
    conn.execute("ROLLBACK")
    conn.close()
    out, err = proc.communicate(timeout=300)
    events += [json.loads(line) for line in out.splitlines()]
    assert proc.returncode == 0, err
    assert events[-1]["event"] == "finished" and events[-1]["status"] == "completed"
    store = RunStore(f"sqlite:///{path}", create=False)
    stored = [s for s, _, _ in store.metrics(events[0]["run_id"], "train/loss")]
    assert stored == [e["step"] for e in events if e["event"] == "metrics"]    # none lost, none twice
    assert len(store.epoch_reports(events[0]["run_id"])) == 4


# ---------------------------------------------------------------- real mounts: read-only media, a full disk
def in_mounts(script: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run a shell script in a mount namespace of its own (mounts vanish with it); skip where not allowed."""
    if not shutil.which("unshare") or os.geteuid() != 0:
        pytest.skip("needs root and unshare for a mount namespace")
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
                           capture_output=True)
    if probe.returncode != 0:
        pytest.skip("mounts are not allowed here")
    return subprocess.run(["unshare", "-m", "sh", "-ec", script], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_a_store_on_read_only_media_reads_and_says_it_cannot_be_written(tmp_path):
    src, ro = tmp_path / "src", tmp_path / "ro"
    src.mkdir()
    ro.mkdir()
    store = RunStore(f"sqlite:///{src / 'runs.sqlite'}")
    rid = make_run(store, pid=dead_pid())             # a dead 'running' run: listing used to UPDATE it
    store.close()                                     # cleanly closed: no -wal, no -shm beside it
    assert sorted(p.name for p in src.iterdir()) == ["runs.sqlite"]
    url = f"sqlite:///{ro / 'runs.sqlite'}"
    code = ("import json, sys\nfrom trainer.store.runs import RunStore, StoreReadOnly\n"
            f"s = RunStore({url!r}, create=False)\n"
            "print(json.dumps([s.readonly, [(r.id, r.status) for r in s.runs()]]))\n"
            f"try:\n    s.update_run({rid}, status='completed')\nexcept StoreReadOnly as e:\n    print(e)\n")
    (tmp_path / "read.py").write_text(code)
    done = in_mounts(f"mount --bind {src} {ro}; mount -o remount,bind,ro {ro}\n"
                     f"{sys.executable} {tmp_path / 'read.py'}\n"
                     f"{sys.executable} -m studio runs --db {url}\n"
                     f"{sys.executable} -m trainer resume {rid} --db {url} || echo exit=$?")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert json.loads(lines[0]) == [True, [[rid, "interrupted"]]]
    assert "the run store is read-only; cannot update run" in lines[1]
    assert any("interrupted" in line for line in lines[2:])          # `runs` lists it
    assert "exit=2" in lines[-1] and "Traceback" not in done.stderr
    assert issubclass(StoreReadOnly, StoreError)


def test_a_full_disk_still_ends_the_run_failed_and_runs_still_lists(tmp_path):
    """The store on a 400 KB tmpfs that fills while the run records metrics: the worker cannot record
    its failure either, yet says `failed` and exits; `runs` lists the dead run (reading writes nothing)."""
    spec = write_spec(tmp_path, train={"epochs": 500, "metrics_interval_s": 0.1})
    url = "sqlite:////mnt/full/runs.sqlite"
    done = in_mounts(f"mkdir -p /mnt/full; mount -t tmpfs -o size=400k tmpfs /mnt/full\n"
                     f"{sys.executable} -m trainer run {spec} --db {url} --run-dir {tmp_path / 'run'} "
                     f"</dev/null || echo exit=$?\n"
                     f"echo ---\n{sys.executable} -m studio runs --db {url}\necho listed=$?", timeout=600)
    assert done.returncode == 0, done.stderr
    worker, listing = done.stdout.split("---\n")
    events = [json.loads(line) for line in worker.splitlines() if line.startswith("{")]
    assert events[0]["event"] == "run_started" and events[-1]["event"] == "failed", done.stderr[-2000:]
    assert "full" in events[-1]["message"] and "recording the failure in the run store failed" in \
        events[-1]["message"]
    assert "exit=1" in worker and "Traceback" not in done.stderr
    assert "listed=0" in listing and "interrupted" in listing


def test_a_worker_whose_store_refuses_every_write_still_says_failed_and_exits(tmp_path):
    """The full disk without a mount (any user): SQLite triggers refuse the metrics rows and the
    'failed' status as a full disk would; the worker still emits failed and exits 1."""
    path = tmp_path / "runs.sqlite"
    RunStore(f"sqlite:///{path}").close()
    conn = sqlite3.connect(path)
    conn.executescript("""
        CREATE TRIGGER full_metrics BEFORE INSERT ON metrics WHEN NEW.step >= 3
            BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END;
        CREATE TRIGGER full_runs BEFORE UPDATE ON runs WHEN NEW.status = 'failed'
            BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END;""")
    conn.close()
    spec = write_spec(tmp_path, train={"epochs": 3})
    done = subprocess.run([sys.executable, "-m", "trainer", "run", str(spec), "--db", f"sqlite:///{path}"],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert done.returncode == 1, done.stderr
    assert events[0]["event"] == "run_started" and events[-1]["event"] == "failed"
    assert "recording the failure in the run store failed" in events[-1]["message"]
    assert "Traceback" not in done.stderr
    run = RunStore(f"sqlite:///{path}", create=False).runs()[0]
    assert run.status == "interrupted"                # the row says running; its process is gone
