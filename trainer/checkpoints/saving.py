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

An epoch's checkpoint is written at most every ``checkpoints.every_s`` seconds of the run (0: every epoch).
An epoch's end in between takes its copy and holds it (:class:`Held`): a newer copy of a kind replaces the
held one, and the held copies are written when the time comes, at the last epoch, and before the run stops,
pauses, fails or ends (:func:`write_held`); an older held best goes before any newer last, so a run resumed
from a last checkpoint finds on disk the best its bookkeeping names. A run of short epochs (digits_cnn's
10 epochs take 1.5 s on two cores) so writes its files once, at its end, instead of after every epoch:
each write's checksum, serialisation, ``fsync`` and store record cost such a run ~10% of its time on the
recorder thread, beside the training threads. What a kill (SIGKILL, power) may lose is the training since
the last write: ``every_s`` at most. A run under torchrun writes every epoch (its ranks save together).
"""

from __future__ import annotations

import copy
import time
from dataclasses import asdict, dataclass, field
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
    one save (one file) for both; written, or held until it is due (:class:`Held`)."""

    def __init__(self, job: Job) -> None:
        self.job = job

    def on_epoch_end(self, event: ev.EpochEnd) -> None:
        job, spec = self.job, self.job.spec
        kinds = (("best",) if spec.checkpoints.best and event.best else ()) + (("last",) if spec.checkpoints.last
                                                                              else ())
        if not kinds:
            return
        if job.dist is not None:       # the ranks save together, every epoch
            save(job, *kinds)
            return
        job.held.hold(take(job, kinds))
        if job.held.due(job.elapsed(), spec.checkpoints.every_s) or event.epoch >= spec.train.epochs:
            write_held(job)


@dataclass
class Taken:
    """A copy of the run's state for a checkpoint (:func:`take`): the tensors (contiguous CPU copies of their
    own), the metadata, and the kinds it was taken as."""

    kinds: tuple[str, ...]
    flat: dict[str, torch.Tensor]
    meta: dict[str, Any]
    best: float | None          # the best metric's value when taken (the best checkpoint's record)


@dataclass
class Held:
    """The copies taken and not written yet, by kind (one copy may be held as both), and the run's clock
    (:meth:`Job.elapsed`) at the last write."""

    kinds: dict[str, Taken] = field(default_factory=dict)
    written_at: float = 0.0

    def hold(self, taken: Taken) -> None:
        for kind in taken.kinds:
            self.kinds[kind] = taken

    def due(self, now: float, every_s: float) -> bool:
        return now - self.written_at >= every_s

    def take_all(self) -> list[tuple[Taken, tuple[str, ...]]]:
        """Every held copy with the kinds it is still held as, oldest first; nothing stays held."""
        copies = sorted({id(t): t for t in self.kinds.values()}.values(), key=lambda t: t.meta["step"])
        out = [(t, tuple(k for k in ("best", "last") if self.kinds.get(k) is t)) for t in copies]
        self.kinds.clear()
        return out


def take(job: Job, kinds: tuple[str, ...]) -> Taken:
    """The run's state as it is now, copied (the next steps change the model, not this copy)."""
    tensors, meta = checkpoint_state(job, kinds)
    return Taken(kinds, snapshot(tensors), meta, job.best.get(job.spec.checkpoints.metric, [None])[0])


def write_held(job: Job, *, drop: tuple[str, ...] = ()) -> None:
    """Write what ``job.held`` holds, oldest first (``drop``: kinds a newer save replaces, not written)."""
    for taken, kinds in job.held.take_all():
        kinds = tuple(k for k in kinds if k not in drop)
        if kinds:
            write(job, taken, kinds)
    job.held.written_at = job.elapsed()


def save(job: Job, *kinds: str) -> None:
    """Save the run as it is now as each of ``kinds`` ("best", "last"): the state is copied here, the
    file written (once), recorded and announced on the recorder thread; what was held goes first."""
    if job.dist is not None:     # every rank writes its shard (torch.distributed.checkpoint)
        for kind in kinds:
            job.dist.save(job, kind)
        return
    taken = take(job, kinds)
    write_held(job, drop=kinds)
    write(job, taken, kinds)


def write(job: Job, taken: Taken, kinds: tuple[str, ...]) -> None:
    """Write ``taken`` as each of ``kinds`` on the recorder thread: one file, the others linked to it."""
    metric, flat, meta = job.spec.checkpoints.metric, taken.flat, {**taken.meta, "kinds": list(kinds)}
    step, epoch, folder = meta["step"], meta["epoch"], job.run_dir / "checkpoints"

    def write() -> None:
        # The sequence a kill may cut anywhere, for each kind: its file (one atomic unit; the first
        # written, the others linked to it), its record, then its older files go. A file without a
        # record is never used; a record always names a whole file.
        first: Path | None = None
        for kind in kinds:
            path = checkpoint_file(folder, kind, step)
            first = write_checkpoint(path, flat, meta) if first is None else link_checkpoint(first, path)
            fault_point("renamed")
            value = taken.best if kind == "best" else None
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
        "scaler": job.scaler.state_dict() if job.scaler is not None else None, "spec": job.spec_dict,
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
    job.held.written_at = job.elapsed()   # the next epoch's checkpoint is due every_s after this one
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
