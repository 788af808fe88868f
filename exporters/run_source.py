"""Export sources from the run store: a run's graph snapshot, a checkpoint, real validation samples.

Reads the store through the trainer's public API (``RunStore``, ``load_checkpoint_weights``,
``checks.setup`` for the run's own data split), so the exporter sees exactly what the run trained on.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from graph_editor.model import Graph, GraphError, graph_from_dict

from .errors import ExportError
from .run_data import run_data
from .source import (
    LOW_PRECISION,
    ExportSource,
    _stem,
    build_reference,
    load_weights,
    read_weights,
)

if TYPE_CHECKING:
    from trainer.store.runs import RunStore

CHECKPOINT_KINDS = ("best", "last")


def from_run(run_id: int, *, checkpoint: str | Path = "best", store: str | None = None,
             verify_batch: int = 64) -> ExportSource:
    """A source for ``run_id``: its graph snapshot with the ``best``/``last`` checkpoint (or a checkpoint
    file), verified on ``verify_batch`` raw samples of the run's validation split, with its metrics."""
    from trainer.checkpoints.single_file import CheckpointError, load_checkpoint_weights
    from trainer.store.runs import RunStore, StoreError

    try:
        runs = RunStore(store, create=False)   # a typo in the path is said, not made into an empty store
    except StoreError as exc:
        raise ExportError(str(exc)) from None
    try:
        run = runs.run(run_id)
        ckpt_path, ckpt_desc = _checkpoint(runs, run_id, checkpoint, run.best_metric)
        metrics = runs.metrics(run_id)
        url = runs.url
    except StoreError as exc:
        raise ExportError(str(exc)) from None
    finally:
        runs.close()
    try:
        graph = graph_from_dict(run.graph)
    except GraphError as exc:
        raise ExportError(f"run {run_id}: its graph snapshot cannot be read: {exc}") from None
    module = build_reference(graph)
    if str(checkpoint) in CHECKPOINT_KINDS:
        try:
            weights = load_checkpoint_weights(ckpt_path)
        except CheckpointError as exc:
            raise ExportError(f"run {run_id}: its {ckpt_desc} cannot be used: {exc}") from None
    else:
        weights = read_weights(ckpt_path)
    weights_dtype = load_weights(module, weights, str(ckpt_path))
    notes = [f"checkpoint: {ckpt_path}"]
    if weights_dtype in LOW_PRECISION or run.spec.get("precision", {}).get("dtype", "fp32") != "fp32":
        notes.append(f"trained with precision {run.spec.get('precision', {}).get('dtype')}, weights stored as "
                     f"{weights_dtype}: exported in float32")
    try:
        data = run_data(run.spec, graph, verify_batch)
    except ExportError as exc:
        raise ExportError(f"run {run_id}: {exc}") from None
    notes += [data.note, data.preprocessing.describe()]
    name = _stem(graph) if not run.name else _stem_of(run.name)
    desc = f"run {run_id} '{run.name or graph.metadata.get('name', '')}', {ckpt_desc}"
    return ExportSource(graph, module, data.samples, f"{name}_run{run_id}", desc, run_id=run_id,
                        checkpoint=str(ckpt_path), weights_dtype=weights_dtype, metrics=metrics, notes=notes,
                        store_url=url, preprocessing=data.preprocessing, labels=data.labels)


def _stem_of(text: str) -> str:
    return _stem(Graph(metadata={"name": text}))


def _checkpoint(runs: RunStore, run_id: int, checkpoint: str | Path, metric: str = "") -> tuple[Path, str]:
    if str(checkpoint) not in CHECKPOINT_KINDS:
        return Path(checkpoint), f"checkpoint file {checkpoint}"
    path = runs.checkpoint_path(run_id, str(checkpoint))
    if path is None:
        raise ExportError(f"run {run_id} has no {checkpoint} checkpoint on disk")
    row = next((c for c in reversed(runs.checkpoints(run_id)) if Path(c.path) == path), None)
    kind = row.kind if row else str(checkpoint)
    fell_back = " (no best checkpoint: the last one)" if kind != str(checkpoint) else ""
    where = f" from epoch {row.epoch}, step {row.step}" if row else ""
    value = f" ({metric or 'metric'} {row.metric:.4g})" if row is not None and row.metric is not None else ""
    return path, f"{kind} checkpoint{where}{value}{fell_back}"


def one_click_run(current: int | None, store: str | None = None) -> int | None:
    """The run one-click export ships: the newest completed run of the same graph as ``current`` (the
    run this window started last), so a run stopped midway never displaces a finished one; ``current``
    itself when no run of its graph completed; None without a current run."""
    from trainer.store.runs import RunStore, StoreError

    if current is None:
        return None
    try:
        runs = RunStore(store, create=False)
    except StoreError:
        return current
    try:
        rows = runs.runs()
    except StoreError:
        return current
    finally:
        runs.close()
    mine = next((r for r in rows if r.id == current), None)
    if mine is None:
        return current
    done = [r.id for r in rows if r.status == "completed" and r.graph_hash == mine.graph_hash]
    return max(done) if done else current


