"""The run store's tables (SQLAlchemy 2 ORM), the schema version and its upgrades.

Schema versions: 1, the first; 2 adds ``runs.pid_started``; 3 adds ``runs.tags`` (a JSON list of
strings: a sweep's ``study:NAME`` and ``trial:N``, or the user's own) and ``runs.notes`` (free text).
Opening an older store upgrades it in place (added columns; the runs it holds are checked by pid
alone, as before, and have no tags and no notes). A database written
by a newer program is refused rather than damaged.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Float, ForeignKey, Integer, String, Text, inspect, text
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from .engine import StoreError

SCHEMA_VERSION = 3
PG_SCHEMA_LOCK = 0x7473_7475_6469_6F   # pg_advisory_xact_lock key: one process creates the tables at a time


def utc_now() -> datetime:
    """Now, in UTC without a zone (what the tables hold)."""
    return datetime.now(UTC).replace(tzinfo=None)


class Base(DeclarativeBase):
    pass


def _text(length: int) -> String:
    """VARCHAR(length) on SQLite (which never enforces it), unlimited TEXT on PostgreSQL (which would):
    a node id of 200 characters in a metric name must not fail a run."""
    return String(length).with_variant(Text(), "postgresql")


BIG = Integer().with_variant(BigInteger(), "postgresql")   # parameter counts and clock ticks pass 2**31


class SchemaInfo(Base):
    __tablename__ = "schema_info"
    id: Mapped[int] = mapped_column(primary_key=True)
    version: Mapped[int] = mapped_column(Integer)


class Run(Base):
    __tablename__ = "runs"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(_text(200), default="")
    status: Mapped[str] = mapped_column(_text(20), index=True)
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    graph: Mapped[dict[str, Any]] = mapped_column(JSON)
    graph_hash: Mapped[str] = mapped_column(_text(64), index=True)
    device: Mapped[str] = mapped_column(_text(40), default="")
    params: Mapped[int] = mapped_column(BIG, default=0)
    host: Mapped[str] = mapped_column(_text(200), default="")
    pid: Mapped[int] = mapped_column(Integer, default=0)
    pid_started: Mapped[int] = mapped_column(BIG, default=0)   # the process's start (clock ticks); 0 = unknown
    run_dir: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(default=utc_now)
    started_at: Mapped[datetime | None] = mapped_column(default=None)
    ended_at: Mapped[datetime | None] = mapped_column(default=None)
    epoch: Mapped[int] = mapped_column(Integer, default=0)
    step: Mapped[int] = mapped_column(Integer, default=0)
    best_metric: Mapped[str] = mapped_column(_text(40), default="")
    best_value: Mapped[float | None] = mapped_column(Float, default=None)
    summary: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)  # final test metrics etc.
    error_kind: Mapped[str] = mapped_column(_text(20), default="")
    error: Mapped[str] = mapped_column(Text, default="")
    tags: Mapped[list[str]] = mapped_column(JSON, default=list)
    notes: Mapped[str] = mapped_column(Text, default="")


class Metric(Base):
    __tablename__ = "metrics"
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"), index=True)
    step: Mapped[int] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(_text(60))
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
    kind: Mapped[str] = mapped_column(_text(20))
    path: Mapped[str] = mapped_column(Text)
    step: Mapped[int] = mapped_column(Integer)
    epoch: Mapped[int] = mapped_column(Integer)
    metric: Mapped[float | None] = mapped_column(Float, default=None)
    created_at: Mapped[datetime] = mapped_column(default=utc_now)


class Artifact(Base):
    __tablename__ = "artifacts"
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"), index=True)
    kind: Mapped[str] = mapped_column(_text(40))
    path: Mapped[str] = mapped_column(Text)
    meta: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utc_now)


def open_schema(engine: Engine, *, readonly: bool, create: bool, shown: str) -> None:
    """Check (read-only) or create and upgrade the tables. Raises :class:`StoreError` for a database
    that is not a run store, one of a newer schema, or (``create`` False) one without the tables."""
    if readonly:
        with Session(engine) as s:
            if not inspect(s.connection()).has_table("schema_info"):
                raise StoreError(f"{shown}: not a run store (read-only, and it has no runs table)")
            info = s.get(SchemaInfo, 1)
            version = info.version if info else 0
        if version != SCHEMA_VERSION:
            raise StoreError(f"{shown}: the run store has schema version {version} and is read-only; "
                             f"this program reads version {SCHEMA_VERSION} (open it once where it can be written)")
        return
    shared = engine.dialect.name != "sqlite"
    with Session(engine) as s, s.begin():
        # a reader (create False) never writes: a file another process is making its tables in, or
        # someone's empty database, is not a run store yet
        if not create and not inspect(s.connection()).has_table("schema_info"):
            raise StoreError(f"{shown}: no run store in this database (it has no runs table; nothing was created)")
        if shared:
            if engine.dialect.name == "postgresql":   # writers starting at once: one creates, the others wait
                s.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": PG_SCHEMA_LOCK})
            Base.metadata.create_all(s.connection())
        elif create and _sqlite_unmade(s):
            # two processes making (or upgrading) one new store at once (two sweeps, a sweep and its
            # first worker) both found no tables and the second's CREATE failed: the first takes SQLite's
            # write lock here, the other waits for it (busy timeout) and then finds the tables made
            s.connection().exec_driver_sql("BEGIN IMMEDIATE")
            Base.metadata.create_all(s.connection())
        info = s.get(SchemaInfo, 1)
        if info is None and not create:
            raise StoreError(f"{shown}: the run store is still being made (no schema version yet; nothing was written)")
        if info is None:
            s.add(SchemaInfo(id=1, version=SCHEMA_VERSION))
        elif info.version > SCHEMA_VERSION:
            raise StoreError(f"{shown}: the run store has schema version {info.version}; this program "
                             f"reads up to {SCHEMA_VERSION}")
        elif info.version < SCHEMA_VERSION:
            _upgrade(s, info)


def _sqlite_unmade(s: Session) -> bool:
    """Whether the SQLite store lacks its tables or its current schema version (read without a lock)."""
    if not inspect(s.connection()).has_table("schema_info"):
        return True
    return s.connection().execute(text("SELECT version FROM schema_info WHERE id = 1")).scalar() != SCHEMA_VERSION


def _upgrade(s: Session, info: SchemaInfo) -> None:
    """Bring a store written by an older version of the schema up to this one, in the open transaction."""
    columns = {c["name"] for c in inspect(s.connection()).get_columns("runs")}
    if "pid_started" not in columns:       # version 1 -> 2
        s.execute(text("ALTER TABLE runs ADD COLUMN pid_started INTEGER NOT NULL DEFAULT 0"))
    if "tags" not in columns:              # version 2 -> 3
        s.execute(text("ALTER TABLE runs ADD COLUMN tags JSON NOT NULL DEFAULT '[]'"))
    if "notes" not in columns:
        s.execute(text("ALTER TABLE runs ADD COLUMN notes TEXT NOT NULL DEFAULT ''"))
    info.version = SCHEMA_VERSION
