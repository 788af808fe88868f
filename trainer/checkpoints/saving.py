"""A run's checkpoints: what they hold, saving them off the training thread, and resuming from one.

A save costs the training thread one copy of the run's state (:func:`~trainer.checkpoints.single_file.
snapshot`: the weights, optimizer state, RNG and the epoch's order, as CPU tensors of their own, and
the bookkeeping as plain values), nothing more: the checksum, the serialisation, the write with its
``fsync``, the store record, the pruning and the ``checkpoint`` event run on the recorder thread
(:class:`~trainer.metrics.recorder.Recorder`), after the metrics submitted before the save and before
anything submitted after it; the next steps may change the model meanwhile, the snapshot keeps the
state it was taken of. An epoch that is both the best and the last writes one file: ``best-N`` and
``last-N`` are hard links to it (a copy where the file system has no links). Whatever reads a run's
records or ends it flushes the recorder first (:func:`trainer.run_outcome.finish`, ``fail``), so a
run never ends before its last save is on disk and recorded; a save that fails fails the run there.
"""

from __future__ import annotations

import copy
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ..callbacks import Callback
from ..loop import EpochTotals
from ..metrics import names
from ..protocol import events as ev
from .single_file import (
    CheckpointError,
    checkpoint_file,
    fault_point,
    link_checkpoint,
    load_optimizer,
    optimizer_tensors,
    prune,
    restore_rng,
    rng_tensors,
    snapshot,
    verify_checkpoint,
    write_checkpoint,
)

if TYPE_CHECKING:
    from ..job import Job


class Checkpoints(Callback):
    """The best checkpoint when an epoch improved the spec's metric, the last one after every epoch:
    one save (one file) for both."""

    def __init__(self, job: Job) -> None:
        self.job = job

    def on_epoch_end(self, event: ev.EpochEnd) -> None:
        spec = self.job.spec
        kinds = (("best",) if spec.checkpoints.best and event.best else ()) + (("last",) if spec.checkpoints.last
                                                                              else ())
        if kinds:
            save(self.job, *kinds)


def save(job: Job, *kinds: str) -> None:
    """Save the run as it is now as each of ``kinds`` ("best", "last"): the state is copied here, the
    file written (once), recorded and announced on the recorder thread."""
    if job.dist is not None:     # every rank writes its shard (torch.distributed.checkpoint)
        for kind in kinds:
            job.dist.save(job, kind)
        return
    tensors, meta = checkpoint_state(job, kinds)
    flat = snapshot(tensors)                      # the next steps change the model, not this copy
    metric = job.spec.checkpoints.metric
    best = job.best.get(metric, [None])[0]
    step, epoch, folder = job.step, job.epoch, job.run_dir / "checkpoints"

    def write() -> None:
        # The sequence a kill may cut anywhere, for each kind: its file (one atomic unit; the first
        # written, the others linked to it), its record, then its older files go. A file without a
        # record is never used; a record always names a whole file.
        first: Path | None = None
        for kind in kinds:
            path = checkpoint_file(folder, kind, step)
            first = write_checkpoint(path, flat, meta) if first is None else link_checkpoint(first, path)
            fault_point("renamed")
            value = best if kind == "best" else None
            job.store.add_checkpoint(job.run_id, kind, str(path), step, epoch, value)
            fault_point("recorded")
            prune(folder, kind, step)
            fault_point("pruned")
            checkpoint_saved(job, ev.Checkpoint(kind=kind, path=str(path), step=step, epoch=epoch, metric=metric,
                                                value=value))

    job.recorder.submit(write)


def checkpoint_saved(job: Job, event: ev.Checkpoint) -> None:
    """A checkpoint is written and recorded: every callback hears of it (reporting emits the event)."""
    for callback in job.callbacks:
        callback.on_checkpoint(event)


def checkpoint_state(job: Job, kinds: tuple[str, ...]) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """What a checkpoint holds: the tensors (weights, optimizer state, RNG, the epoch's order) and the
    metadata that lets a resumed run end where an uninterrupted one would (plain values of their own:
    written later, they must not follow the run)."""
    opt_tensors, opt_meta = optimizer_tensors(job.opt)
    tensors = {**{f"model.{k}": v for k, v in job.model.state_dict().items()}, **opt_tensors,
               **rng_tensors(job.loaders["train"].generator)}
    in_epoch = job.order is not None
    if in_epoch:
        tensors["loop.order"] = job.order
    meta: dict[str, Any] = {
        "run_id": job.run_id, "kinds": list(kinds), "step": job.step, "epoch": job.epoch, "optimizer": opt_meta,
        "position": job.position if in_epoch else None, "totals": asdict(job.totals) if in_epoch else None,
        "best": copy.deepcopy(job.best), "bad_epochs": job.bad_epochs, "lr_override": job.controls.lr_override,
        "scaler": job.scaler.state_dict() if job.scaler is not None else None, "spec": job.spec.to_dict(),
        "time": job.elapsed(),
    }
    return tensors, meta


def restore(job: Job, checkpoint: tuple[dict[str, torch.Tensor], dict[str, Any]]) -> None:
    """Continue from a (verified) checkpoint: weights, optimizer, RNG, step, epoch position and bookkeeping."""
    tensors, meta = checkpoint
    job.model.load_state_dict({k.removeprefix("model."): v for k, v in tensors.items() if k.startswith("model.")})
    load_optimizer(job.opt, tensors, meta["optimizer"])
    restore_rng(tensors, job.loaders["train"].generator)
    job.step, job.epoch = meta["step"], meta["epoch"]
    job.best, job.bad_epochs = meta["best"], meta["bad_epochs"]
    job.controls.lr_override = meta["lr_override"]
    job.started = time.monotonic() - _run_time(job, meta)
    if job.scaler is not None and meta.get("scaler"):
        job.scaler.load_state_dict(meta["scaler"])
    if meta["position"] is not None:
        job.order = tensors["loop.order"].to(job.setup.device)
        job.position, job.totals = meta["position"], EpochTotals(**meta["totals"])


def _run_time(job: Job, meta: dict[str, Any]) -> float:
    """The run's clock at a checkpoint: saved with it, or (older checkpoints) the last "time" metric
    recorded up to its step."""
    if isinstance(meta.get("time"), (int, float)):
        return float(meta["time"])
    times = [v for s, _n, v in job.store.metrics(job.run_id, names.TIME.name) if s <= meta["step"] and v is not None]
    return max(times, default=0.0)


def load_best_weights(job: Job) -> bool:
    """Put the newest whole best checkpoint's weights into the model (for the final test); False when
    there is none."""
    if not job.spec.checkpoints.best:
        return False
    if job.dist is not None:
        return job.dist.load_best(job)
    job.recorder.flush()         # the last save is on disk and recorded
    for row in job.store.checkpoint_candidates(job.run_id, "best"):
        try:
            tensors, _ = verify_checkpoint(row.path, step=row.step)
        except CheckpointError:
            continue
        job.model.load_state_dict({k.removeprefix("model."): v for k, v in tensors.items()
                                   if k.startswith("model.")})
        return True
    return False
