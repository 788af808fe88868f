"""Run history for the runs dock, read through the run store's methods (no Qt and no SQL here).

:func:`run_rows` turns stored runs into the plain rows the dock shows; :func:`load_curves` reads
the metric series to overlay; :func:`delete_run` removes a run (through the store) and its files.
"""

from __future__ import annotations

import contextlib
import shutil
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from trainer.metrics import names
from trainer.store.runs import Checkpoint, Run, RunStore

# What can be overlaid: store metric name -> label.
CURVES = {m.name: m.label for m in (names.VAL_ACCURACY, names.VAL_LOSS, names.TRAIN_LOSS, names.TRAIN_ACCURACY,
                                    names.LR, names.SAMPLES_PER_S, names.CPU_PERCENT, names.RSS, names.GPU_UTIL,
                                    names.THREADS,
                                    names.MEMORY_ALLOCATED, names.MEMORY_RESERVED)}


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
    recipe: str = ""        # optimizer, lr, batch, epochs, precision, compile, dataset
    tags: tuple[str, ...] = ()
    notes: str = ""
    spec: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)   # the filter's recipe fields


def recipe(spec: dict[str, Any] | None) -> str:
    """How a run was trained, in one line: ``adamw, lr 0.003, batch 64, 10 epochs, fp32, compile
    off, dataset digits`` (what the spec leaves out is the trainer's default, not shown)."""
    spec = spec if isinstance(spec, dict) else {}

    def part(section: str, key: str) -> Any:
        block = spec.get(section)
        return block.get(key) if isinstance(block, dict) else None

    bits = []
    for value, text in ((part("optim", "name"), "{}"), (part("optim", "lr"), "lr {:g}"), (part("schedule", "name"), "{} schedule"),
                        (part("train", "batch_size"), "batch {}"), (part("train", "epochs"), "{} epochs"),
                        (part("precision", "dtype"), "{}"), (part("precision", "compile"), "compile {}"),
                        (part("data", "dataset"), "dataset {}")):
        if value is not None and value != "":
            try:
                bits.append(text.format(value))
            except (TypeError, ValueError):
                bits.append(f"{text.split(' ')[0]} {value}" if " " in text else str(value))
    model: dict[str, Any] = spec["model"] if isinstance(spec.get("model"), dict) else {}
    if model.get("init_from"):
        bits.append(f"from {Path(str(model['init_from'])).name}")
    if model.get("frozen"):
        bits.append(f"{len(model['frozen'])} frozen")
    return ", ".join(bits)


def start_line(model: dict[str, Any]) -> str:
    """``model.init_from``, ``frozen``, ``lr_scale`` and ``reinit`` in words (the Train dialog, run details)."""
    parts = [f"from weights {model['init_from']}" if model.get("init_from") else "from scratch"]
    for key, what in (("frozen", "frozen"), ("lr_scale", "learning rate"), ("reinit", "re-initialised")):
        entries = [str(e).replace("=", " x") for e in model.get(key) or []]
        if entries:
            parts.append(f"{what}: {', '.join(entries)}")
    return "; ".join(parts)


def graph_label(run: Run) -> str:
    """A short name for a run's graph: its file name, its own name, or its hash."""
    model = (run.spec or {}).get("model", {})
    g = model.get("graph") if isinstance(model, dict) else None
    if isinstance(g, str) and g:
        return Path(g).name.removesuffix(".graph.json")
    meta = (run.graph or {}).get("metadata") or {}
    name = (run.graph or {}).get("name") or meta.get("name") or meta.get("template")
    return str(name) if name else f"#{run.graph_hash[:8]}"


def run_seconds(run: Run, now: datetime, clock: float | None) -> float | None:
    """How long a run has trained: the worker's own clock, which goes on across a resume and leaves out
    the time between a stop and its resume (the ``seconds`` of its summary once it ended, else its last
    ``time`` metric, ``clock``); for a run that recorded neither, the span from its start to its end (or now)."""
    seconds = (run.summary or {}).get("seconds") if run.status != "running" else None
    if isinstance(seconds, (int, float)) and not isinstance(seconds, bool):
        return float(seconds)
    if clock is not None:
        return clock
    if run.started_at is None:
        return None
    end = run.ended_at or (now if run.status == "running" else None)
    return (end - run.started_at).total_seconds() if end else None


VAL_ACCURACY = "val/accuracy"    # the table's best: the highest a run reached, whatever picked its best checkpoint


def run_rows(store: RunStore, cache: dict[int, tuple[float | None, float | None]] | None = None) -> list[RunRow]:
    """Every run in the store (running ones whose worker died are marked interrupted first).

    ``cache`` keeps the best validation accuracy and the duration of runs that have ended, so polling
    the store costs indexed queries per running run, not per run ever made.
    """
    now = datetime.now(UTC).replace(tzinfo=None)
    cache = {} if cache is None else cache
    rows = []
    runs = store.runs()
    asked = [r.id for r in runs if r.id not in cache or r.status == "running"]
    maxes = store.metric_maxes(asked, (VAL_ACCURACY, names.TIME.name)) if asked else {}
    for r in runs:
        if r.id in cache and r.status != "running":
            best, seconds = cache[r.id]
        else:
            best, seconds = maxes.get((r.id, VAL_ACCURACY)), run_seconds(r, now, maxes.get((r.id, names.TIME.name)))
            if r.status == "running":
                cache.pop(r.id, None)
            else:
                cache[r.id] = best, seconds
        data = (r.spec or {}).get("data", {})
        rows.append(RunRow(
            id=r.id, name=r.name or "", status=r.status, graph=graph_label(r),
            dataset=str(data.get("dataset", "")) if isinstance(data, dict) else "",
            best=best, best_metric=r.best_metric or "", params=r.params or 0,
            seconds=seconds, device=r.device or "",
            started=r.started_at.strftime("%Y-%m-%d %H:%M") if r.started_at else "",
            error=r.error or "", epoch=r.epoch or 0, step=r.step or 0, recipe=recipe(r.spec),
            tags=tuple(r.tags or ()), notes=r.notes or "", spec=r.spec if isinstance(r.spec, dict) else {}))
    return rows


def lr_changes(store: RunStore, run_id: int) -> str:
    """What became of a run's learning rate, in a line: the rates set by hand during the run (the
    ``lr/set`` metric, with their steps) and the last rate trained with; "" for a run with no lr rows."""
    lrs = [(s, v) for s, _n, v in store.metrics(run_id, names.LR.name) if v is not None]
    if not lrs:
        return ""
    bits = [f"{lrs[0][1]:.4g} at step {lrs[0][0]}"]
    bits += [f"set by hand to {v:.4g} at step {s}" for s, _n, v in store.metrics(run_id, names.LR_SET.name) if v is not None]
    if len(lrs) > 1:
        bits.append(f"{lrs[-1][1]:.4g} at step {lrs[-1][0]}")
    return "Learning rate: " + ", ".join(bits) + "."


def load_curves(store: RunStore, run_id: int, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Steps and values of one metric of one run (missing values dropped)."""
    pts = [(s, v) for s, _n, v in store.metrics(run_id, name) if v is not None]
    if not pts:
        return np.zeros(0), np.zeros(0)
    arr = np.asarray(pts, dtype=np.float64)
    return arr[:, 0], arr[:, 1]


@dataclass(frozen=True)
class ConfusionSource:
    """The validation matrix the Runs workspace shows for a run, and the checkpoint of that very
    epoch whose re-evaluation gives its samples (None: no checkpoint of that epoch is kept)."""

    report: dict[str, Any]
    checkpoint: Checkpoint | None


def confusion_source(store: RunStore, run_id: int) -> ConfusionSource | None:
    """The newest epoch report of ``run_id`` that has a checkpoint of its own (best before last), else
    the newest report with none; None when the run stored no matrix.

    A report's weights are those of a checkpoint saved at the step the report was made (reports carry
    it); for reports of older runs without a step, a best checkpoint of the same epoch (best is only
    saved at an epoch's end, where a last one may be saved mid-epoch by a stop).
    """
    reports = [r for r in store.epoch_reports(run_id) if r.get("confusion")]
    if not reports:
        return None
    kept = [c for kind in ("best", "last") for c in store.checkpoint_candidates(run_id, kind)]
    for report in reversed(reports):
        for c in kept:
            same = c.step == report["step"] if "step" in report else c.kind == "best" and c.epoch == report["epoch"]
            if same:
                return ConfusionSource(report, c)
    return ConfusionSource(reports[-1], None)


def run_graph(store: RunStore, run_id: int) -> dict[str, Any]:
    """The graph snapshot a run trained (what the editor opens and the diff compares)."""
    return dict(store.run(run_id).graph or {})


def describe_runs(runs: list[tuple[int, str]], most: int = 8) -> str:
    """Runs as a confirmation names them: ``run 3 "alpha"`` or ``3 runs: 1 "a", 2 and 5 "c"``
    (ids with their names, at most ``most`` of them, then how many more)."""
    names = [f'{run_id} "{name}"' if name else str(run_id) for run_id, name in runs]
    if len(names) == 1:
        return f"run {names[0]}"
    if len(names) > most:
        names = [*names[:most], f"{len(runs) - most} more"]
    return f"{len(runs)} runs: {', '.join(names[:-1])} and {names[-1]}"


def delete_run(store: RunStore, run_id: int) -> list[str]:
    """Remove a run with all its rows (:meth:`RunStore.delete_run`), then its files: the run folder
    (checkpoints, logs and any artifact saved in it) and checkpoint files kept elsewhere.

    Refuses a running run (stop it first). Exported artifacts saved outside the run folder are the
    user's files and are kept; a folder or file already gone is not an error. Returns the paths
    removed from disk. A file that cannot be removed raises OSError naming it; the run's rows are
    gone by then, so the run is deleted either way and the error names what was left on disk.
    """
    run = store.run(run_id)
    if run.status == "running":
        raise ValueError(f"run {run_id} is still running; stop it before deleting it")
    files = [Path(c.path) for c in store.checkpoints(run_id)]
    run_dir = store.delete_run(run_id)
    removed: list[str] = []
    if run_dir and Path(run_dir).is_dir():
        with contextlib.suppress(FileNotFoundError):  # removed meanwhile: what was asked for
            shutil.rmtree(run_dir)
        removed.append(run_dir)
    for f in files:
        for p in (f, f.with_suffix(".json")):
            if p.is_file():
                p.unlink(missing_ok=True)
                removed.append(str(p))
    return removed

