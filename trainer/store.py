"""The run store: every run, its spec, graph, metrics, checkpoints and exported artifacts.

SQLAlchemy 2 ORM over any database URL. The default is a SQLite file in the user's data directory
in WAL mode, so the studio can read while a worker writes. The URL comes from ``--db``, else the
``TORCH_STUDIO_DB`` environment variable, else the default. The schema carries a version
(``schema_info``); a database written by a newer program is refused rather than damaged.

A run left ``running`` by a worker process that no longer exists (killed, machine crashed) is marked
``interrupted`` the next time runs are listed or read. A run remembers its process by pid and, where
the system says (Linux), the process's start time, so a pid the system has since given to another
process does not keep a dead run "running".

Schema versions: 1, the first; 2 adds ``runs.pid_started``. Opening a version-1 store upgrades it in
place (one added column; the runs it holds are checked by pid alone, as before).
"""

from __future__ import annotations

import json
import os
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import platformdirs
from sqlalchemy import (
    JSON,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    create_engine,
    delete,
    event,
    func,
    inspect,
    select,
    text,
)
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from .liveness import process_alive, process_started

SCHEMA_VERSION = 2
ENV_VAR = "TORCH_STUDIO_DB"
STATUSES = ("running", "completed", "stopped", "early_stopped", "failed", "interrupted")
APP = "torch-studio"


def default_url() -> str:
    """``TORCH_STUDIO_DB`` or a SQLite file in the platform's user data directory."""
    if os.environ.get(ENV_VAR):
        return os.environ[ENV_VAR]
    path = Path(platformdirs.user_data_dir(APP)) / "runs.sqlite"
    return f"sqlite:///{path}"


def default_run_root() -> Path:
    return Path(platformdirs.user_data_dir(APP)) / "runs"


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


class Base(DeclarativeBase):
    pass


class SchemaInfo(Base):
    __tablename__ = "schema_info"
    id: Mapped[int] = mapped_column(primary_key=True)
    version: Mapped[int] = mapped_column(Integer)


class Run(Base):
    __tablename__ = "runs"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200), default="")
    status: Mapped[str] = mapped_column(String(20), index=True)
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    graph: Mapped[dict[str, Any]] = mapped_column(JSON)
    graph_hash: Mapped[str] = mapped_column(String(64), index=True)
    device: Mapped[str] = mapped_column(String(40), default="")
    params: Mapped[int] = mapped_column(Integer, default=0)
    host: Mapped[str] = mapped_column(String(200), default="")
    pid: Mapped[int] = mapped_column(Integer, default=0)
    pid_started: Mapped[int] = mapped_column(Integer, default=0)   # the process's start (clock ticks); 0 = unknown
    run_dir: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(default=_now)
    started_at: Mapped[datetime | None] = mapped_column(default=None)
    ended_at: Mapped[datetime | None] = mapped_column(default=None)
    epoch: Mapped[int] = mapped_column(Integer, default=0)
    step: Mapped[int] = mapped_column(Integer, default=0)
    best_metric: Mapped[str] = mapped_column(String(40), default="")
    best_value: Mapped[float | None] = mapped_column(Float, default=None)
    summary: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)  # final test metrics etc.
    error_kind: Mapped[str] = mapped_column(String(20), default="")
    error: Mapped[str] = mapped_column(Text, default="")


class Metric(Base):
    __tablename__ = "metrics"
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"), index=True)
    step: Mapped[int] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(String(60))
    value: Mapped[float | None] = mapped_column(Float)


class EpochReport(Base):
    """Per-epoch evaluation detail (per-class figures and confusion matrix) as JSON."""

    __tablename__ = "epoch_reports"
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"), index=True)
    epoch: Mapped[int] = mapped_column(Integer)
    report: Mapped[dict[str, Any]] = mapped_column(JSON)


class Checkpoint(Base):
    __tablename__ = "checkpoints"
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"), index=True)
    kind: Mapped[str] = mapped_column(String(20))
    path: Mapped[str] = mapped_column(Text)
    step: Mapped[int] = mapped_column(Integer)
    epoch: Mapped[int] = mapped_column(Integer)
    metric: Mapped[float | None] = mapped_column(Float, default=None)
    created_at: Mapped[datetime] = mapped_column(default=_now)


class Artifact(Base):
    __tablename__ = "artifacts"
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"), index=True)
    kind: Mapped[str] = mapped_column(String(40))
    path: Mapped[str] = mapped_column(Text)
    meta: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(default=_now)


class StoreError(RuntimeError):
    pass


def make_engine(url: str) -> Engine:
    """An engine for ``url``; SQLite gets WAL, a busy timeout and its folder created."""
    if url.startswith("sqlite:///") and url != "sqlite:///:memory:":
        Path(url.removeprefix("sqlite:///")).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url)
    if engine.dialect.name == "sqlite":
        @event.listens_for(engine, "connect")
        def _pragmas(conn: Any, _record: Any) -> None:
            cur = conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA busy_timeout=10000")
            cur.close()
    return engine


class RunStore:
    """Reads and writes runs. Cheap to open; safe to open in several processes on one SQLite file."""

    def __init__(self, url: str | None = None) -> None:
        self.url = url or default_url()
        self.engine = make_engine(self.url)
        Base.metadata.create_all(self.engine)
        with Session(self.engine) as s, s.begin():
            info = s.get(SchemaInfo, 1)
            if info is None:
                s.add(SchemaInfo(id=1, version=SCHEMA_VERSION))
            elif info.version > SCHEMA_VERSION:
                raise StoreError(f"{self.url}: the run store has schema version {info.version}; this program "
                                 f"reads up to {SCHEMA_VERSION}")
            elif info.version < SCHEMA_VERSION:
                _upgrade(s, info)

    def close(self) -> None:
        self.engine.dispose()

    # ------------------------------------------------------------------ writing
    def create_run(self, *, name: str, spec: dict[str, Any], graph: dict[str, Any], graph_hash: str,
                   device: str, params: int, run_dir: str = "") -> int:
        with Session(self.engine) as s, s.begin():
            run = Run(name=name, status="running", spec=spec, graph=graph, graph_hash=graph_hash, device=device,
                      params=params, host=socket.gethostname(), pid=os.getpid(),
                      pid_started=process_started(os.getpid()), run_dir=run_dir,
                      started_at=_now())
            s.add(run)
            s.flush()
            return run.id

    def update_run(self, run_id: int, **values: Any) -> None:
        with Session(self.engine) as s, s.begin():
            run = s.get(Run, run_id)
            if run is None:
                raise StoreError(f"no run {run_id}")
            for k, v in values.items():
                setattr(run, k, v)

    def claim(self, run_id: int) -> None:
        """This process now runs ``run_id`` (a resume): status running, our pid and host."""
        self.update_run(run_id, status="running", pid=os.getpid(), pid_started=process_started(os.getpid()),
                        host=socket.gethostname(), ended_at=None, error="", error_kind="")

    def finish(self, run_id: int, status: str, *, error_kind: str = "", error: str = "",
               summary: dict[str, Any] | None = None) -> None:
        values: dict[str, Any] = {"status": status, "ended_at": _now(), "error_kind": error_kind, "error": error}
        if summary is not None:
            values["summary"] = summary
        self.update_run(run_id, **values)

    def add_metrics(self, run_id: int, rows: list[tuple[int, str, float | None]]) -> None:
        """Insert many (step, name, value) rows in one transaction."""
        if rows:   # a Core insert on a connection: half the cost of going through an ORM session
            with self.engine.begin() as conn:
                conn.execute(Metric.__table__.insert(),
                             [{"run_id": run_id, "step": st, "name": n, "value": v} for st, n, v in rows])

    def add_epoch_report(self, run_id: int, epoch: int, report: dict[str, Any]) -> None:
        with Session(self.engine) as s, s.begin():
            s.add(EpochReport(run_id=run_id, epoch=epoch, report=report))

    def add_checkpoint(self, run_id: int, kind: str, path: str, step: int, epoch: int,
                       metric: float | None) -> None:
        with Session(self.engine) as s, s.begin():
            s.add(Checkpoint(run_id=run_id, kind=kind, path=path, step=step, epoch=epoch, metric=metric))

    def add_artifact(self, run_id: int, kind: str, path: str, meta: dict[str, Any] | None = None) -> int:
        """Record a file made from a run (an ONNX export, a TensorBoard log...)."""
        with Session(self.engine) as s, s.begin():
            art = Artifact(run_id=run_id, kind=kind, path=str(path), meta=dict(meta or {}))
            s.add(art)
            s.flush()
            return art.id

    def delete_run(self, run_id: int) -> str:
        """Delete a run and every row that belongs to it (metrics, epoch reports, checkpoint and
        artifact records) in one transaction; returns its ``run_dir`` so the caller can remove the
        files (the store keeps no files of its own). An unknown id raises :class:`StoreError`."""
        with Session(self.engine) as s, s.begin():
            run = s.get(Run, run_id)
            if run is None:
                raise StoreError(f"no run {run_id} in {self.url}")
            run_dir = run.run_dir
            for table in (Metric, EpochReport, Checkpoint, Artifact):
                s.execute(delete(table).where(table.run_id == run_id))
            s.delete(run)
        return run_dir

    # ------------------------------------------------------------------ reading
    def runs(self) -> list[Run]:
        self.mark_interrupted()
        with Session(self.engine, expire_on_commit=False) as s:
            return list(s.scalars(select(Run).order_by(Run.id)))

    def run(self, run_id: int) -> Run:
        self.mark_interrupted()
        with Session(self.engine, expire_on_commit=False) as s:
            run = s.get(Run, run_id)
            if run is None:
                raise StoreError(f"no run {run_id} in {self.url}")
            return run

    def metrics(self, run_id: int, name: str | None = None) -> list[tuple[int, str, float | None]]:
        with Session(self.engine) as s:
            q = select(Metric.step, Metric.name, Metric.value).where(Metric.run_id == run_id)
            if name:
                q = q.where(Metric.name == name)
            return [tuple(r) for r in s.execute(q.order_by(Metric.id))]  # type: ignore[misc]

    def metric_max(self, run_id: int, name: str) -> float | None:
        """The highest value metric ``name`` reached in run ``run_id`` (None without one): one indexed query."""
        with Session(self.engine) as s:
            return s.scalar(select(func.max(Metric.value)).where(Metric.run_id == run_id, Metric.name == name))

    def epoch_reports(self, run_id: int) -> list[dict[str, Any]]:
        with Session(self.engine) as s:
            q = select(EpochReport).where(EpochReport.run_id == run_id).order_by(EpochReport.id)
            return [{"epoch": r.epoch, **r.report} for r in s.scalars(q)]

    def checkpoints(self, run_id: int) -> list[Checkpoint]:
        with Session(self.engine, expire_on_commit=False) as s:
            return list(s.scalars(select(Checkpoint).where(Checkpoint.run_id == run_id).order_by(Checkpoint.id)))

    def checkpoint_path(self, run_id: int, kind: str = "best") -> Path | None:
        """The newest ``kind`` ("best" or "last") checkpoint file of a run, or None; best falls back to last."""
        for k in (kind, "last") if kind == "best" else (kind,):
            rows = [c for c in self.checkpoints(run_id) if c.kind == k and Path(c.path).exists()]
            if rows:
                return Path(rows[-1].path)
        return None

    def artifacts(self, run_id: int) -> list[Artifact]:
        with Session(self.engine, expire_on_commit=False) as s:
            return list(s.scalars(select(Artifact).where(Artifact.run_id == run_id).order_by(Artifact.id)))

    def mark_interrupted(self) -> list[int]:
        """Runs 'running' on this host whose worker process is gone become 'interrupted'."""
        host, gone = socket.gethostname(), []
        with Session(self.engine) as s, s.begin():
            for run in s.scalars(select(Run).where(Run.status == "running", Run.host == host)):
                if not process_alive(run.pid, run.pid_started):
                    run.status, run.ended_at = "interrupted", _now()
                    run.error = run.error or "the worker process ended without finishing the run"
                    gone.append(run.id)
        return gone


def _upgrade(s: Session, info: SchemaInfo) -> None:
    """Bring a store written by an older version of the schema up to this one, in the open transaction."""
    columns = {c["name"] for c in inspect(s.connection()).get_columns("runs")}
    if "pid_started" not in columns:       # version 1 -> 2
        s.execute(text("ALTER TABLE runs ADD COLUMN pid_started INTEGER NOT NULL DEFAULT 0"))
    info.version = SCHEMA_VERSION


def run_to_dict(run: Run) -> dict[str, Any]:
    """A run as plain JSON-able data (for ``--json`` output and the GUI)."""
    out = {c.name: getattr(run, c.name) for c in Run.__table__.columns}
    for k in ("created_at", "started_at", "ended_at"):
        out[k] = out[k].isoformat() + "Z" if out[k] else None
    return json.loads(json.dumps(out, default=str))
