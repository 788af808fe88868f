"""The run store on PostgreSQL: a throwaway server (initdb + pg_ctl, where installed) and the store's
cases against it: write and read back, the list, concurrent writers in real processes, interrupted
runs, a real worker run and ``torch-studio runs`` through ``--db postgresql://``. Skips without a
PostgreSQL server program or the psycopg driver; the driver and URL checks run everywhere."""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from trainer.store.runs import RunStore, StoreError, run_to_dict

pytestmark = pytest.mark.process     # a PostgreSQL server, writers, the worker, the CLI
HAS_DRIVER = importlib.util.find_spec("psycopg") is not None
ROOT = Path(__file__).resolve().parents[3]


def pg_bin(name: str) -> str | None:
    """A PostgreSQL server program: on PATH, else in Debian's /usr/lib/postgresql/<version>/bin."""
    found = shutil.which(name)
    if found:
        return found
    versions = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(p.split("/")[4]))
    return versions[-1] if versions else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A PostgreSQL server in a temporary folder, on 127.0.0.1, trusting local connections."""

    def __init__(self) -> None:
        self.initdb, self.pg_ctl = pg_bin("initdb"), pg_bin("pg_ctl")
        self.port = free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="torch-studio-pg-"))
        self.data = self.folder / "data"
        self.user = None
        if os.geteuid() == 0:     # initdb and postgres refuse to run as root: run them as an unprivileged user
            self.user = next((u for u in ("postgres", "nobody") if _user_exists(u)), None)
            if self.user is None:
                raise RuntimeError("running as root with neither a postgres nor a nobody user")
            os.chown(self.folder, pwd.getpwnam(self.user).pw_uid, -1)
        self._run([self.initdb, "-D", str(self.data), "-U", "studio", "-A", "trust", "-E", "UTF8", "--no-sync",
                   "--no-instructions"])
        self.start()
        self.count = 0

    def start(self) -> None:
        self._run([self.pg_ctl, "-D", str(self.data), "-l", str(self.folder / "log"), "-w", "-t", "60", "-o",
                   f"-p {self.port} -h 127.0.0.1 -k {self.folder} -F -c max_connections=60", "start"])

    def halt(self) -> None:
        """Stop the server as a crash or an administrator would (its data stays, :meth:`start` brings it back)."""
        self._run([self.pg_ctl, "-D", str(self.data), "-m", "immediate", "-w", "stop"])

    def _run(self, argv: list[str]) -> None:
        if self.user:
            argv = ["runuser", "-u", self.user, "--", *argv]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=self.folder)
        if done.returncode != 0:
            log = self.folder / "log"
            raise RuntimeError(f"{argv[-1]} failed: {done.stderr}{log.read_text() if log.exists() else ''}")

    def new_database(self) -> str:
        """A fresh, empty database; its SQLAlchemy URL (no driver named: the store picks one)."""
        import psycopg

        self.count += 1
        name = f"runs_{self.count}"
        with psycopg.connect(f"host=127.0.0.1 port={self.port} user=studio dbname=postgres",
                             autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return f"postgresql://studio@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        try:
            self._run([self.pg_ctl, "-D", str(self.data), "-m", "immediate", "-w", "stop"])
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    if not (pg_bin("initdb") and pg_bin("pg_ctl")):
        pytest.skip("no PostgreSQL server programs (initdb, pg_ctl); .ci/run installs them as root")
    if not HAS_DRIVER:
        pytest.skip("no psycopg driver (pip install 'psycopg[binary]')")
    srv = Server()
    yield srv
    srv.stop()


@pytest.fixture
def pg(server: Server) -> str:
    return server.new_database()


def make_run(store: RunStore, name: str = "r", **extra) -> int:
    return store.create_run(name=name, spec={"a": 1}, graph={"nodes": []}, graph_hash="h", device="cpu",
                            params=extra.pop("params", 3), **extra)


# --------------------------------------------------------------- against a server
def test_write_and_read_back(pg):
    store = RunStore(pg)
    assert store.engine.dialect.name == "postgresql"
    rid = make_run(store)
    store.add_metrics(rid, [(1, "train/loss", 2.0), (2, "train/loss", 1.5), (2, "lr", 0.1)])
    store.add_epoch_report(rid, 1, {"per_class": [0.5, 1.0]})
    store.add_checkpoint(rid, "last", "/nowhere/last.safetensors", 2, 1, None)
    art = store.add_artifact(rid, "onnx", "/x/model.onnx", {"opset": 18})
    store.finish(rid, "completed", summary={"test_accuracy": 0.9}, epoch=1, step=2)
    other = RunStore(pg, create=False)     # a second store, as the studio's runs dock opens it
    run = other.run(rid)
    assert (run.status, run.spec, run.summary, run.epoch, run.step) == ("completed", {"a": 1}, {"test_accuracy": 0.9}, 1, 2)
    assert other.metrics(rid, "train/loss") == [(1, "train/loss", 2.0), (2, "train/loss", 1.5)]
    assert other.metric_max(rid, "train/loss") == 2.0
    assert other.epoch_reports(rid) == [{"epoch": 1, "per_class": [0.5, 1.0]}]
    assert [(c.kind, c.step) for c in other.checkpoints(rid)] == [("last", 2)]
    assert other.artifacts(rid)[0].id == art and other.artifacts(rid)[0].meta == {"opset": 18}
    assert run_to_dict(run)["ended_at"].endswith("Z")
    second = make_run(store, "second")
    assert [(r.id, r.name) for r in other.runs()] == [(rid, "r"), (second, "second")]
    assert store.delete_run(rid) == "" and [r.id for r in other.runs()] == [second]
    assert other.metrics(rid) == []


def test_what_sqlite_takes_postgresql_takes_too(pg):
    """SQLite enforces no VARCHAR length and stores 64-bit integers and NaN in JSON: so must this."""
    store = RunStore(pg)
    long_node = "block_" + "x" * 194
    rid = make_run(store, "n" * 300, params=3_000_000_000)
    store.add_metrics(rid, [(1, f"inspect/grad_norm/{long_node}", float("nan")), (1, "loss", float("inf"))])
    store.update_run(rid, pid_started=2**40, summary={"test_loss": float("nan"), "ok": [1.0, float("-inf")]})
    run = store.run(rid)
    assert len(run.name) == 300 and run.params == 3_000_000_000 and run.pid_started == 2**40
    assert run.summary == {"test_loss": None, "ok": [1.0, None]}     # PostgreSQL's JSON has no NaN
    (_, name, nan), (_, _, inf) = store.metrics(rid)
    assert name.endswith(long_node) and nan != nan and inf == float("inf")   # float columns keep them


def test_reading_an_empty_database_says_so_and_creates_nothing(pg):
    with pytest.raises(StoreError, match="no run store in this database"):
        RunStore(pg, create=False)
    from sqlalchemy import create_engine, inspect

    engine = create_engine(pg.replace("postgresql://", "postgresql+psycopg://"))
    assert inspect(engine).get_table_names() == []
    engine.dispose()


WRITER = textwrap.dedent("""
    import sys
    from trainer.store.runs import RunStore
    url, n = sys.argv[1], int(sys.argv[2])
    store = RunStore(url)             # every writer opens the fresh database at once: one creates the tables
    rid = store.create_run(name=f"w{n}", spec={}, graph={}, graph_hash="h", device="cpu", params=1)
    for step in range(40):
        store.add_metrics(rid, [(step, "loss", float(n)), (step, "acc", 0.5)])
    store.finish(rid, "completed", step=40)
    print(rid)
""")


def test_concurrent_writers_in_real_processes(pg):
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, pg, str(n)], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for n in range(4)]
    outs = [p.communicate(timeout=240) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in outs]
    store = RunStore(pg, create=False)
    runs = store.runs()
    assert sorted(r.name for r in runs) == ["w0", "w1", "w2", "w3"] and {r.status for r in runs} == {"completed"}
    assert sorted(int(out) for out, _ in outs) == sorted(r.id for r in runs)
    for r in runs:
        rows = store.metrics(r.id, "loss")
        assert len(rows) == 40 and {v for _, _, v in rows} == {float(r.name[1:])}


def test_a_run_whose_worker_died_reads_and_is_marked_interrupted(pg):
    store = RunStore(pg)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    gone, mine, elsewhere = make_run(store), make_run(store), make_run(store)
    store.update_run(gone, pid=dead.pid)
    store.update_run(elsewhere, pid=dead.pid, host="another-machine")   # a teammate's run: not ours to judge
    reader = RunStore(pg, create=False)
    assert [r.status for r in reader.runs()] == ["interrupted", "running", "running"]
    assert reader.run(gone).status == "interrupted"
    assert store.mark_interrupted() == [gone]
    assert RunStore(pg).run(gone).error and store.run(mine).status == "running"
    assert store.run(elsewhere).status == "running"


def test_a_server_stores_runs_get_a_folder_of_their_own(pg, server):
    from trainer.store.runs import default_run_root
    from trainer.worker import default_run_dir

    store = RunStore(pg)
    folder = default_run_dir(store, 1)
    database = pg.rsplit("/", 1)[1]
    assert folder == default_run_root() / f"postgresql-127.0.0.1-{store.engine.url.port}-{database}" / "run-1"
    assert default_run_dir(RunStore(server.new_database()), 1) != folder
    # the default SQLite store's run 1 is default_run_root() / "run-1": never the same folder


@pytest.mark.slow
def test_a_worker_run_and_the_runs_command_through_a_postgresql_url(pg, tmp_path):
    from graph_editor.model import Graph, InputSpec, save_graph

    g = Graph(InputSpec((1, 8, 8)), 10, {"name": "tiny"})
    g.chain(("Input", "input"), ("Flatten", "flat"), ("Linear", "fc", {"out_features": 10}), ("Output", "output"))
    save_graph(g, tmp_path / "tiny.graph.json")
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"schema_version": 1, "name": "on-postgres", "model": {"graph": "tiny.graph.json"},
                                "train": {"epochs": 1, "batch_size": 64}, "device": "cpu"}))
    env = {**os.environ, "TORCH_STUDIO_DB": ""}
    done = subprocess.run([sys.executable, "-m", "trainer", "run", str(spec), "--db", pg, "--run-dir",
                           str(tmp_path / "run")], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    listed = subprocess.run([sys.executable, "-m", "studio", "runs", "--db", pg, "--json"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120, env=env)
    assert listed.returncode == 0, listed.stderr
    (run,) = json.loads(listed.stdout)
    assert (run["name"], run["status"], run["epoch"]) == ("on-postgres", "completed", 1)
    store = RunStore(pg, create=False)
    assert store.metrics(run["id"], "test/accuracy") and store.checkpoint_path(run["id"]) is not None


def test_a_server_stopped_mid_run_is_waited_for_then_said_in_one_line(server, monkeypatch):
    """issue 22: stopping PostgreSQL mid-run failed the run in 0.8 s with the raw driver text. A write
    now retries while the server is away (as for a SQLite lock) and goes through once it is back; a
    server away longer than TORCH_STUDIO_DB_RETRY_S is one line naming the store, not a traceback."""
    import threading

    store = RunStore(server.new_database())
    rid = make_run(store)
    store.add_metrics(rid, [(1, "train/loss", 2.0)])       # a pooled connection, as a running worker holds
    server.halt()
    back = threading.Timer(2.0, server.start)
    back.start()
    try:
        store.add_metrics(rid, [(2, "train/loss", 1.5)])   # waits for the server, then writes
    finally:
        back.join()
    assert [v for _, _, v in store.metrics(rid, "train/loss")] == [2.0, 1.5]
    server.halt()
    monkeypatch.setenv("TORCH_STUDIO_DB_RETRY_S", "1")
    try:
        with pytest.raises(StoreError) as err:
            store.add_metrics(rid, [(3, "train/loss", 1.0)])
    finally:
        server.start()
    message = str(err.value)
    assert message.startswith(f"postgresql://studio@127.0.0.1:{server.port}/")
    assert "the database server could not be reached for 1 s" in message and message.endswith("cannot record metrics")
    assert "\n" not in message


# --------------------------------------------------------------- no server needed
def test_a_password_never_appears_in_a_message():
    with pytest.raises(StoreError) as err:
        RunStore(f"postgresql://team:s3cret-pw@127.0.0.1:{free_port()}/runs", create=False)
    assert "s3cret-pw" not in str(err.value) and "team:***@127.0.0.1" in str(err.value)


def test_a_postgresql_url_without_a_driver_names_the_package_to_install(monkeypatch):
    for module in ("psycopg", "psycopg2", "pg8000"):
        monkeypatch.setitem(sys.modules, module, None)      # as if not installed
    for url in ("postgresql://team@db.lab/runs", "postgres://team@db.lab/runs"):
        with pytest.raises(StoreError, match=r"needs a database driver.*pip install 'psycopg\[binary\]'"):
            RunStore(url)
    with pytest.raises(StoreError, match="the PostgreSQL driver pg8000 is not installed \\(pip install pg8000"):
        RunStore("postgresql+pg8000://team@db.lab/runs")


@pytest.mark.qt
def test_the_runs_dock_reads_a_postgresql_store(pg, qtbot):
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    from studio.training.runs_dock import RunsPanel

    writer = RunStore(pg)
    first, second = make_run(writer, "alpha"), make_run(writer, "beta")
    writer.add_metrics(first, [(s, "val/accuracy", 0.5 + 0.1 * s) for s in range(1, 4)])
    writer.finish(first, "completed")
    panel = RunsPanel(RunStore(pg, create=False))
    qtbot.addWidget(panel)
    panel.resize(1000, 600)
    panel.show()
    qtbot.waitExposed(panel)
    assert panel.model.rowCount() == 2 and panel.row(first) is not None and panel.row(second) is not None
    table = panel.table
    for r in range(panel.proxy.rowCount()):
        index = panel.proxy.index(r, 0)
        if panel.proxy.data(index, Qt.ItemDataRole.UserRole) == first:
            QTest.mouseClick(table.viewport(), Qt.MouseButton.LeftButton, pos=table.visualRect(index).center())
    assert panel.selected_ids() == [first]
    QTest.mouseClick(panel.buttons["Overlay"], Qt.MouseButton.LeftButton)
