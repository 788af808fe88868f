"""Export sources from the run store: a run's graph snapshot, a checkpoint, real validation samples.

Reads the store through the trainer's public API (``RunStore``, ``load_checkpoint_weights``,
``checks.setup`` for the run's own data split), so the exporter sees exactly what the run trained on.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import torch

from graph_editor.model import GraphError, graph_from_dict

from .errors import ExportError
from .source import (
    LOW_PRECISION,
    ExportSource,
    _stem,
    build_reference,
    load_weights,
    random_inputs,
    read_weights,
)

if TYPE_CHECKING:
    from trainer.store import RunStore

CHECKPOINT_KINDS = ("best", "last")


def from_run(run_id: int, *, checkpoint: str | Path = "best", store: str | None = None,
             verify_batch: int = 8) -> ExportSource:
    """A source for ``run_id``: its graph snapshot with the ``best``/``last`` checkpoint (or a checkpoint
    file), verified on ``verify_batch`` samples of the run's validation split, with its metrics."""
    from trainer.checkpoint import CheckpointError, load_checkpoint_weights
    from trainer.store import RunStore, StoreError

    try:
        runs = RunStore(store, create=False)   # a typo in the path is said, not made into an empty store
    except StoreError as exc:
        raise ExportError(str(exc)) from None
    try:
        run = runs.run(run_id)
        ckpt_path, ckpt_desc = _checkpoint(runs, run_id, checkpoint)
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
    samples, how = validation_samples(run.spec, verify_batch)
    if samples is None:
        samples = random_inputs(graph, verify_batch)
    notes.append(how)
    name = _stem(graph) if not run.name else _stem_of(run.name)
    desc = f"run {run_id} '{run.name or graph.metadata.get('name', '')}', {ckpt_desc}"
    return ExportSource(graph, module, samples, f"{name}_run{run_id}", desc, run_id=run_id, checkpoint=str(ckpt_path),
                        weights_dtype=weights_dtype, metrics=metrics, notes=notes, store_url=url)


def _stem_of(text: str) -> str:
    from graph_editor.model import Graph

    return _stem(Graph(metadata={"name": text}))


def _checkpoint(runs: RunStore, run_id: int, checkpoint: str | Path) -> tuple[Path, str]:
    if str(checkpoint) not in CHECKPOINT_KINDS:
        return Path(checkpoint), f"checkpoint file {checkpoint}"
    path = runs.checkpoint_path(run_id, str(checkpoint))
    if path is None:
        raise ExportError(f"run {run_id} has no {checkpoint} checkpoint on disk")
    row = next((c for c in reversed(runs.checkpoints(run_id)) if Path(c.path) == path), None)
    kind = row.kind if row else str(checkpoint)
    fell_back = " (no best checkpoint: the last one)" if kind != str(checkpoint) else ""
    where = f" from epoch {row.epoch}, step {row.step}" if row else ""
    return path, f"{kind} checkpoint{where}{fell_back}"


def validation_samples(spec: dict, count: int) -> tuple[torch.Tensor | None, str]:
    """``count`` samples of the run's validation split (test split if it has none), prepared the way the
    run prepared them; (None, why) when the data cannot be loaded any more."""
    from trainer.checks import setup
    from trainer.data import normalise
    from trainer.spec import SpecError, spec_from_dict

    # only the data is needed here: load it on the CPU whatever device and precision the run used
    local = {**spec, "device": "cpu", "precision": {**spec.get("precision", {}), "dtype": "fp32", "compile": "off"}}
    try:
        st = setup(spec_from_dict(local))
    except (SpecError, OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[-1].strip()
        return None, f"verified on random input-spec data: the run's dataset cannot be loaded ({first})"
    split, which = (st.splits.val, "validation") if len(st.splits.val) else (st.splits.test, "test")
    x = split.samples(count)
    if st.streamed or not x.is_floating_point():
        x = normalise(x, st.splits.mean, st.splits.std)
    return x.float().contiguous(), f"verified on {len(x)} real {which} samples of the run's dataset"
