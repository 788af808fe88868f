"""The run store: every run, its spec, graph, metrics, checkpoints and exported artifacts.

SQLAlchemy 2 ORM over any database URL. The default is a SQLite file in the user's data directory
in WAL mode, so the studio can read while a worker writes. The URL comes from ``--db``, else the
``TORCH_STUDIO_DB`` environment variable, else the default. The schema carries a version
(``schema_info``); a database written by a newer program is refused rather than damaged.

A run left ``running`` by a worker process that no longer exists (killed, machine crashed) reads as
``interrupted``: listing and reading never write (they work on a full disk and on read-only media);
the next writer (a worker starting) records it. A run remembers its process by pid and, where the
system says (Linux), the process's start time, so a pid the system has since given to another
process does not keep a dead run "running".

Opening: ``RunStore(url)`` creates a SQLite store that does not exist yet (a worker's first run);
``RunStore(url, create=False)`` (the reading commands) says the store does not exist instead, so a
typo in a path never makes folders and an empty store. A SQLite file that cannot be written (read-only
media, no permission) opens read-only: reading works and every write raises :class:`StoreReadOnly`.
A URL that is not a database, a dialect without its driver, a folder, a file that is not SQLite, a
damaged file: :class:`StoreError` naming the URL and the problem, never a driver's traceback.

Writes retry while another process holds the SQLite write lock, and while a database server cannot
be reached (stopped, restarting; with backoff, up to ``TORCH_STUDIO_DB_RETRY_S`` seconds, 300 by
default): a transient lock or a server restart never fails a run; one that lasts longer is one line.

PostgreSQL (a team's shared store): ``postgresql://user@host/db`` with the psycopg driver
(``pip install 'psycopg[binary]'``; psycopg2 or pg8000 serve too, whichever is installed). The
tables are made by the first program that opens the database (one at a time: an advisory lock);
the reading commands refuse a database without them. Text columns have no length limit there and
counts are 64-bit, as on SQLite; NaN and infinities inside JSON columns are kept as null (PostgreSQL's
JSON has none). A URL's password never appears in a message.

Three modules: this one (:class:`RunStore`: the writes and the run queries), :mod:`trainer.store.engine`
(a URL to an engine, :class:`StoreError`) and :mod:`trainer.store.schema` (the tables, the schema
version and its upgrades).
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import platformdirs
from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session

from .engine import StoreError, StoreReadOnly, is_locked, is_unreachable, make_engine, reason, shown_url
from .liveness import process_alive, process_started
from .schema import Artifact, Checkpoint, EpochReport, Metric, Run, open_schema, utc_now

__all__ = ["RunStore", "StoreError", "StoreReadOnly", "Run", "Checkpoint", "Artifact", "default_url",
           "default_run_root", "run_to_dict", "ENV_VAR", "RETRY_ENV", "STATUSES", "INTERRUPTED"]

ENV_VAR = "TORCH_STUDIO_DB"
RETRY_ENV = "TORCH_STUDIO_DB_RETRY_S"
T = TypeVar("T")
# "pruned": a sweep stopped the run because its trial fell behind (the rule and the epoch in ``error``)
STATUSES = ("running", "completed", "stopped", "early_stopped", "pruned", "failed", "interrupted")
APP = "torch-studio"


def default_url() -> str:
    """``TORCH_STUDIO_DB`` or a SQLite file in the platform's user data directory."""
    if os.environ.get(ENV_VAR):
        return os.environ[ENV_VAR]
    path = Path(platformdirs.user_data_dir(APP)) / "runs.sqlite"
    return f"sqlite:///{path}"


def default_run_root() -> Path:
    return Path(platformdirs.user_data_dir(APP)) / "runs"


OPEN_ATTEMPTS = 5     # opening a store that another process is making waits this many times for its lock

class RunStore:
    """Reads and writes runs. Cheap to open; safe to open in several processes on one SQLite file.

    ``create=False`` refuses a SQLite store that does not exist (reading commands). Every problem
    with the URL or the file raises :class:`StoreError`."""

    def __init__(self, url: str | None = None, *, create: bool = True) -> None:
        self.url = url or default_url()
        self.shown = shown_url(self.url)     # for messages: no password
        self.engine, self.readonly = make_engine(self.url, create=create)
        for attempt in range(OPEN_ATTEMPTS):
            began = time.monotonic()
            try:
                open_schema(self.engine, readonly=self.readonly, create=create, shown=self.shown)
                return
            except StoreError:
                self.engine.dispose()
                raise
            except SQLAlchemyError as exc:
                # stores opened at once on a new file: SQLite answers "locked" at once, not after its busy
                # timeout, to the one that began reading before the other took the lock (1 in ~50 opens);
                # a lock held past the busy timeout is said as before, not waited out five times
                quick = time.monotonic() - began < 1.0
                if isinstance(exc, DBAPIError) and is_locked(exc) and quick and attempt < OPEN_ATTEMPTS - 1:
                    time.sleep(0.05 * (attempt + 1))
                    continue
                self.engine.dispose()
                raise StoreError(f"{self.shown}: cannot open the run store ({reason(exc)})") from None

    def close(self) -> None:
        self.engine.dispose()

    def folder_name(self) -> str:
        """A folder name of its own for a server's store (dialect, host, port, database: two stores never
        share a run's checkpoints in the user data directory); "" for SQLite (its runs sit beside it)."""
        u = self.engine.url
        if u.get_backend_name() == "sqlite":
            return ""
        parts = (u.get_backend_name(), u.host or "local", str(u.port or ""), u.database or "")
        return "".join(c if c.isalnum() or c in "._-" else "_" for c in "-".join(p for p in parts if p))

    def _write(self, what: str, fn: Callable[[], T]) -> T:
        """Run one write transaction; retry it while another process holds the lock. A read-only or
        full store raises StoreError saying so."""
        if self.readonly:
            raise StoreReadOnly(f"{self.shown}: the run store is read-only; cannot {what}")
        patience = float(os.environ.get(RETRY_ENV) or 300)
        deadline = time.monotonic() + patience
        pause = 0.05
        while True:
            try:
                return fn()
            except (OperationalError, InterfaceError) as exc:   # InterfaceError: a connection found closed
                text = str(exc.orig).lower()
                transient = is_locked(exc) or is_unreachable(exc)   # a lock, or a server restarting
                if transient and time.monotonic() < deadline:
                    time.sleep(pause)
                    pause = min(pause * 2, 2.0)
                    continue
                if is_unreachable(exc):
                    raise StoreError(f"{self.shown}: the database server could not be reached for {patience:g} s "
                                     f"({reason(exc)}); cannot {what}") from None
                if "readonly" in text or "read-only" in text:
                    raise StoreReadOnly(f"{self.shown}: the run store is read-only; cannot {what}") from None
                if "full" in text:
                    raise StoreError(f"{self.shown}: the disk holding the run store is full; cannot {what}") \
                        from None
                if is_locked(exc):
                    raise StoreError(f"{self.shown}: another process held the run store's lock too long; "
                                     f"cannot {what}") from None
                raise

    def _read(self, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except StoreError:
            raise
        except SQLAlchemyError as exc:
            raise StoreError(f"{self.shown}: cannot read the run store ({reason(exc)})") from None

    # ------------------------------------------------------------------ writing
    def create_run(self, *, name: str, spec: dict[str, Any], graph: dict[str, Any], graph_hash: str,
                   device: str, params: int, run_dir: str = "", tags: Sequence[str] = ()) -> int:
        def write() -> int:
            with Session(self.engine) as s, s.begin():
                run = Run(name=name, status="running", spec=spec, graph=graph, graph_hash=graph_hash, device=device,
                          params=params, tags=list(tags), host=socket.gethostname(), pid=os.getpid(),
                          pid_started=process_started(os.getpid()), run_dir=run_dir, started_at=utc_now())
                s.add(run)
                s.flush()
                return run.id
        return self._write("create a run", write)

    def update_run(self, run_id: int, **values: Any) -> None:
        def write() -> None:
            with self.engine.begin() as conn:
                self._update(conn, run_id, values)
        self._write(f"update run {run_id}", write)

    @staticmethod
    def _update(conn: Any, run_id: int, values: dict[str, Any]) -> None:
        """Set ``values`` on run ``run_id``'s row: a Core UPDATE (loading the run through the ORM would read
        and parse its spec and graph JSON, every epoch)."""
        if conn.execute(update(Run).where(Run.id == run_id).values(**values)).rowcount != 1:
            raise StoreError(f"no run {run_id}")

    def claim(self, run_id: int) -> None:
        """This process now runs ``run_id`` (a resume): status running, our pid and host."""
        self.update_run(run_id, status="running", pid=os.getpid(), pid_started=process_started(os.getpid()),
                        host=socket.gethostname(), ended_at=None, error="", error_kind="")

    def rewind(self, run_id: int, step: int, epoch: int) -> None:
        """Forget what ``run_id`` recorded after the checkpoint a resume starts from (metrics after
        ``step``, epoch reports after ``epoch``, checkpoint records after ``step``): the resumed run
        records those again, once. One transaction, with the run's step and epoch."""
        def write() -> None:
            with Session(self.engine) as s, s.begin():
                s.execute(delete(Metric).where(Metric.run_id == run_id, Metric.step > step))
                s.execute(delete(EpochReport).where(EpochReport.run_id == run_id, EpochReport.epoch > epoch))
                s.execute(delete(Checkpoint).where(Checkpoint.run_id == run_id, Checkpoint.step > step))
                run = s.get(Run, run_id)
                if run is None:
                    raise StoreError(f"no run {run_id}")
                run.step, run.epoch = step, epoch
        self._write(f"rewind run {run_id}", write)

    def finish(self, run_id: int, status: str, *, error_kind: str = "", error: str = "",
               summary: dict[str, Any] | None = None, **progress: int) -> None:
        """Record how a run ended (and, in ``progress``, its last ``epoch``/``step``), in one write."""
        values: dict[str, Any] = {"status": status, "ended_at": utc_now(), "error_kind": error_kind, "error": error,
                                  **progress}
        if summary is not None:
            values["summary"] = summary
        self.update_run(run_id, **values)

    def add_metrics(self, run_id: int, rows: list[tuple[int, str, float | None]]) -> None:
        """Insert many (step, name, value) rows in one transaction."""
        if not rows:
            return
        values = [{"run_id": run_id, "step": st, "name": n, "value": v} for st, n, v in rows]

        def write() -> None:   # a Core insert on a connection: half the cost of going through an ORM session
            with self.engine.begin() as conn:
                conn.execute(insert(Metric), values)
        self._write("record metrics", write)

    def add_epoch_report(self, run_id: int, epoch: int, report: dict[str, Any]) -> None:
        def write() -> None:
            with Session(self.engine) as s, s.begin():
                s.add(EpochReport(run_id=run_id, epoch=epoch, report=report))
        self._write("record an epoch report", write)

    def record_epoch(self, run_id: int, rows: list[tuple[int, str, float | None]], report: dict[str, Any], *,
                     epoch: int, **run_values: Any) -> None:
        """Epoch ``epoch``'s end in one transaction: its metric rows, its report and the run's progress
        (the epoch, and ``run_values``: step, best metric...), all or none of them."""
        metrics = [{"run_id": run_id, "step": st, "name": n, "value": v} for st, n, v in rows]

        def write() -> None:   # Core statements on one connection, as add_metrics
            with self.engine.begin() as conn:
                self._update(conn, run_id, {"epoch": epoch, **run_values})
                if metrics:
                    conn.execute(insert(Metric), metrics)
                conn.execute(insert(EpochReport).values(run_id=run_id, epoch=epoch, report=report))
        self._write(f"record epoch {epoch} of run {run_id}", write)

    def add_checkpoint(self, run_id: int, kind: str, path: str, step: int, epoch: int,
                       metric: float | None) -> None:
        def write() -> None:
            with self.engine.begin() as conn:
                conn.execute(insert(Checkpoint).values(run_id=run_id, kind=kind, path=path, step=step, epoch=epoch,
                                                       metric=metric))
        self._write("record a checkpoint", write)

    def add_artifact(self, run_id: int, kind: str, path: str, meta: dict[str, Any] | None = None) -> int:
        """Record a file made from a run (an ONNX export, a TensorBoard log...)."""
        def write() -> int:
            with Session(self.engine) as s, s.begin():
                art = Artifact(run_id=run_id, kind=kind, path=str(path), meta=dict(meta or {}))
                s.add(art)
                s.flush()
                return art.id
        return self._write(f"record the artifact {path}", write)

    def delete_run(self, run_id: int) -> str:
        """Delete a run and every row that belongs to it (metrics, epoch reports, checkpoint and
        artifact records) in one transaction; returns its ``run_dir`` so the caller can remove the
        files (the store keeps no files of its own). An unknown id raises :class:`StoreError`."""
        def write() -> str:
            with Session(self.engine) as s, s.begin():
                run = s.get(Run, run_id)
                if run is None:
                    raise StoreError(f"no run {run_id} in {self.shown}")
                run_dir = run.run_dir
                for table in (Metric, EpochReport, Checkpoint, Artifact):
                    s.execute(delete(table).where(table.run_id == run_id))
                s.delete(run)
            return run_dir
        return self._write(f"delete run {run_id}", write)

    def mark_interrupted(self) -> list[int]:
        """Record as 'interrupted' the runs 'running' on this host whose worker process is gone.
        Reading does not need this (it shows them interrupted); a writer calls it."""
        host, gone = socket.gethostname(), []

        def write() -> None:
            with Session(self.engine) as s, s.begin():
                for run in s.scalars(select(Run).where(Run.status == "running", Run.host == host)):
                    if _dead(run, host):
                        run.status, run.ended_at = "interrupted", utc_now()
                        run.error = run.error or INTERRUPTED
                        gone.append(run.id)
        self._write("mark interrupted runs", write)
        return gone

    # ------------------------------------------------------------------ reading
    def runs(self) -> list[Run]:
        """Every run, oldest first; a run whose worker is gone reads 'interrupted'. Never writes."""
        def read() -> list[Run]:
            with Session(self.engine, expire_on_commit=False) as s:
                rows = list(s.scalars(select(Run).order_by(Run.id)))
                s.expunge_all()
            return [_as_seen(r) for r in rows]
        return self._read(read)

    def run(self, run_id: int) -> Run:
        def read() -> Run:
            with Session(self.engine, expire_on_commit=False) as s:
                run = s.get(Run, run_id)
                if run is None:
                    raise StoreError(f"no run {run_id} in {self.shown}")
                s.expunge(run)
                return _as_seen(run)
        return self._read(read)

    def metrics(self, run_id: int, name: str | None = None) -> list[tuple[int, str, float | None]]:
        def read() -> list[tuple[int, str, float | None]]:
            with Session(self.engine) as s:
                q = select(Metric.step, Metric.name, Metric.value).where(Metric.run_id == run_id)
                if name:
                    q = q.where(Metric.name == name)
                return [tuple(r) for r in s.execute(q.order_by(Metric.id))]  # type: ignore[misc]
        return self._read(read)

    def metric_max(self, run_id: int, name: str) -> float | None:
        """The highest value metric ``name`` reached in run ``run_id`` (None without one): one indexed query."""
        def read() -> float | None:
            with Session(self.engine) as s:
                return s.scalar(select(func.max(Metric.value)).where(Metric.run_id == run_id, Metric.name == name))
        return self._read(read)

    def metric_maxes(self, run_ids: Sequence[int], names: Sequence[str]) -> dict[tuple[int, str], float]:
        """The highest value of each metric in ``names`` for each run in ``run_ids``, by (run id, name):
        one grouped query per 500 runs (the Runs table asked :meth:`metric_max` twice a run, 2,000 queries
        and most of its first show with 1,000 runs)."""
        ids = list(dict.fromkeys(run_ids))

        def read() -> dict[tuple[int, str], float]:
            out: dict[tuple[int, str], float] = {}
            with Session(self.engine) as s:
                for i in range(0, len(ids), 500):      # SQLite's limit on bound variables
                    q = (select(Metric.run_id, Metric.name, func.max(Metric.value))
                         .where(Metric.run_id.in_(ids[i:i + 500]), Metric.name.in_(list(names)))
                         .group_by(Metric.run_id, Metric.name))
                    out.update({(rid, name): float(v) for rid, name, v in s.execute(q) if v is not None})
            return out
        return self._read(read)

    def epoch_reports(self, run_id: int) -> list[dict[str, Any]]:
        def read() -> list[dict[str, Any]]:
            with Session(self.engine) as s:
                q = select(EpochReport).where(EpochReport.run_id == run_id).order_by(EpochReport.id)
                return [{"epoch": r.epoch, **r.report} for r in s.scalars(q)]
        return self._read(read)

    def checkpoints(self, run_id: int) -> list[Checkpoint]:
        def read() -> list[Checkpoint]:
            with Session(self.engine, expire_on_commit=False) as s:
                q = select(Checkpoint).where(Checkpoint.run_id == run_id).order_by(Checkpoint.id)
                return list(s.scalars(q))
        return self._read(read)

    def checkpoint_candidates(self, run_id: int, kind: str) -> list[Checkpoint]:
        """The ``kind`` checkpoint records of a run whose files exist, newest first (a resume tries
        them in this order until one verifies)."""
        rows = [c for c in self.checkpoints(run_id) if c.kind == kind and Path(c.path).exists()]  # file or .dcp folder
        return sorted(rows, key=lambda c: (c.step, c.id), reverse=True)

    def checkpoint_path(self, run_id: int, kind: str = "best") -> Path | None:
        """The newest ``kind`` ("best" or "last") checkpoint file of a run, or None; best falls back to last."""
        for k in (kind, "last") if kind == "best" else (kind,):
            rows = [c for c in self.checkpoints(run_id) if c.kind == k and Path(c.path).exists()]
            if rows:
                return Path(rows[-1].path)
        return None

    def artifacts(self, run_id: int) -> list[Artifact]:
        def read() -> list[Artifact]:
            with Session(self.engine, expire_on_commit=False) as s:
                return list(s.scalars(select(Artifact).where(Artifact.run_id == run_id).order_by(Artifact.id)))
        return self._read(read)


INTERRUPTED = "the worker process ended without finishing the run"


def _dead(run: Run, host: str) -> bool:
    return run.status == "running" and run.host == host and not process_alive(run.pid, run.pid_started)


def _as_seen(run: Run) -> Run:
    """A detached run as a reader should see it: 'interrupted' when its worker on this host is gone."""
    if _dead(run, socket.gethostname()):
        run.status, run.ended_at = "interrupted", run.ended_at or utc_now()
        run.error = run.error or INTERRUPTED
    return run


def run_to_dict(run: Run) -> dict[str, Any]:
    """A run as plain JSON-able data (for ``--json`` output and the GUI)."""
    out = {c.name: getattr(run, c.name) for c in Run.__table__.columns}
    for k in ("created_at", "started_at", "ended_at"):
        out[k] = out[k].isoformat() + "Z" if out[k] else None
    return json.loads(json.dumps(out, default=str))
