"""Run history for the runs dock, read from the trainer's run store (no Qt here).

:func:`run_rows` turns stored runs into the plain rows the dock shows; :func:`load_curves` reads
the metric series to overlay; :func:`delete_run` removes a run's rows and its files.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from trainer.store import Artifact, Checkpoint, EpochReport, Metric, Run, RunStore

# What can be overlaid: store metric name -> label.
CURVES = {"val/accuracy": "val accuracy", "val/loss": "val loss", "train/loss": "train loss",
          "train/accuracy": "train accuracy", "lr": "learning rate", "samples_per_s": "samples/s"}


@dataclass(frozen=True)
class RunRow:
    """One run as the dock lists it."""

    id: int
    name: str
    status: str
    graph: str
    dataset: str
    best: float | None      # best validation accuracy reached
    best_metric: str        # what chose the run's best checkpoint
    params: int
    seconds: float | None
    device: str
    started: str
    error: str
    epoch: int
    step: int


def graph_label(run: Run) -> str:
    """A short name for a run's graph: its file name, its own name, or its hash."""
    model = (run.spec or {}).get("model", {})
    g = model.get("graph") if isinstance(model, dict) else None
    if isinstance(g, str) and g:
        return Path(g).name.removesuffix(".graph.json")
    meta = (run.graph or {}).get("metadata") or {}
    name = (run.graph or {}).get("name") or meta.get("name") or meta.get("template")
    return str(name) if name else f"#{run.graph_hash[:8]}"


def _seconds(run: Run, now: datetime) -> float | None:
    if run.started_at is None:
        return None
    end = run.ended_at or (now if run.status == "running" else None)
    return (end - run.started_at).total_seconds() if end else None


def best_val_accuracy(store: RunStore, run_id: int) -> float | None:
    """The highest validation accuracy a run reached (whatever metric picked its best checkpoint)."""
    with Session(store.engine) as s:
        return s.scalar(select(func.max(Metric.value)).where(Metric.run_id == run_id,
                                                             Metric.name == "val/accuracy"))


def run_rows(store: RunStore, best_cache: dict[int, float | None] | None = None) -> list[RunRow]:
    """Every run in the store (running ones whose worker died are marked interrupted first).

    ``best_cache`` keeps the best validation accuracy of runs that have ended, so polling the
    store costs one indexed query per running run, not one per run ever made.
    """
    now = datetime.now(UTC).replace(tzinfo=None)
    cache = {} if best_cache is None else best_cache
    rows = []
    for r in store.runs():
        if r.id not in cache or r.status == "running":
            best = best_val_accuracy(store, r.id)
            if r.status == "running":
                cache.pop(r.id, None)
            else:
                cache[r.id] = best
        else:
            best = cache[r.id]
        data = (r.spec or {}).get("data", {})
        rows.append(RunRow(
            id=r.id, name=r.name or "", status=r.status, graph=graph_label(r),
            dataset=str(data.get("dataset", "")) if isinstance(data, dict) else "",
            best=best, best_metric=r.best_metric or "", params=r.params or 0,
            seconds=_seconds(r, now), device=r.device or "",
            started=r.started_at.strftime("%Y-%m-%d %H:%M") if r.started_at else "",
            error=r.error or "", epoch=r.epoch or 0, step=r.step or 0))
    return rows


def load_curves(store: RunStore, run_id: int, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Steps and values of one metric of one run (missing values dropped)."""
    pts = [(s, v) for s, _n, v in store.metrics(run_id, name) if v is not None]
    if not pts:
        return np.zeros(0), np.zeros(0)
    arr = np.asarray(pts, dtype=np.float64)
    return arr[:, 0], arr[:, 1]


def run_graph(store: RunStore, run_id: int) -> dict[str, Any]:
    """The graph snapshot a run trained (what the editor opens and the diff compares)."""
    return dict(store.run(run_id).graph or {})


def delete_run(store: RunStore, run_id: int) -> list[str]:
    """Remove a run, its metrics, reports, checkpoint and artifact records, and its run folder.

    Refuses a running run (stop it first). Exported artifacts saved outside the run folder are the
    user's files and are kept. Returns the paths removed from disk.
    """
    run = store.run(run_id)
    if run.status == "running":
        raise ValueError(f"run {run_id} is still running; stop it before deleting it")
    files = [Path(c.path) for c in store.checkpoints(run_id)]
    with Session(store.engine) as s, s.begin():
        for table in (Metric, EpochReport, Checkpoint, Artifact):
            s.execute(delete(table).where(table.run_id == run_id))
        s.execute(delete(Run).where(Run.id == run_id))
    removed: list[str] = []
    if run.run_dir and Path(run.run_dir).is_dir():
        shutil.rmtree(run.run_dir, ignore_errors=True)
        removed.append(run.run_dir)
    for f in files:
        for p in (f, f.with_suffix(".json")):
            if p.exists() and p.is_file():
                p.unlink(missing_ok=True)
                removed.append(str(p))
    return removed
