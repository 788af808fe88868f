"""One rank of a torchrun run: ``python -m trainer run SPEC`` with torchrun's variables set.

Every rank builds the same model from the same seed, wraps it (DDP, or FSDP2's ``fully_shard``) and
trains on its slice of each global batch (:mod:`trainer.distributed.data`); the loop's metric reads are
all-reduced and its stop decisions are rank 0's (:func:`trainer.distributed.parallel.agree`), so every rank
takes the same steps. Only rank 0 writes the store and the events; the others get a store that
keeps nothing and an emitter into /dev/null. Checkpoints are sharded
(:mod:`trainer.distributed.sharded_checkpoints`).

Started by our launcher (``--run-id``), a failing rank writes its reason to a file the launcher
reads and the launcher records the run's end; started by ``torchrun`` directly, rank 0 creates the
run and records its own failure.
"""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from ..checkpoints.saving import checkpoint_saved, checkpoint_state, restore
from ..checkpoints.single_file import CheckpointError, fault_point, prune, verify_checkpoint
from ..checks import setup
from ..finetune import lr_scales
from ..job import (
    Job,
    _timed_first_call,
    build_model,
    core_callbacks,
    run_epochs,
    start_loader_helper,
    start_loaders,
)
from ..loop import NonFiniteLoss, Window, make_train_step
from ..optim import Schedule, make_optimizer
from ..protocol import events as ev
from ..protocol.controls import Controls
from ..run_outcome import count_params, default_run_dir, fail, finish, first_line, stored_spec
from ..spec import load_spec
from ..store.runs import RunStore
from .data import rank_loaders
from .lifeline import note_alive
from .parallel import (
    Context,
    agree,
    close,
    init,
    is_peer_error,
    shard_fsdp2,
    share,
    window_reduce,
    wrap_ddp,
    write_failure,
)
from .sharded_checkpoints import checkpoint_dir, load_sharded, save_sharded, to_layout, verify_sharded


class NullStore:
    """The store of ranks other than 0: every write is dropped (rank 0 writes the run)."""

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


class RankRole:
    """What the job asks of the ranks together: agreement, sharded checkpoints, the best weights."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def agree(self, stop: bool, due: bool) -> tuple[bool, bool]:
        return agree(self.ctx, stop, due)

    def sum_over_ranks(self, sums: torch.Tensor) -> torch.Tensor:
        """Every rank's evaluation sums added up (each rank evaluated its share of the split)."""
        dist.all_reduce(sums)
        return sums

    def save(self, job: Job, kind: str) -> Path:
        """Every rank writes its shard; rank 0 renames, records, prunes and reports (as job.save does)."""
        job.recorder.flush()
        tensors, meta = checkpoint_state(job, (kind,))
        path = save_sharded(checkpoint_dir(job.run_dir / "checkpoints", kind, job.step), tensors, meta,
                            rank=self.ctx.rank, group=self.ctx.control)
        if self.ctx.main:
            metric = job.spec.checkpoints.metric
            value = job.best.get(metric, [None])[0] if kind == "best" else None
            fault_point("renamed")
            job.store.add_checkpoint(job.run_id, kind, str(path), job.step, job.epoch, value)
            fault_point("recorded")
            prune(path.parent, kind, job.step)
            fault_point("pruned")
            checkpoint_saved(job, ev.Checkpoint(kind=kind, path=str(path), step=job.step, epoch=job.epoch,
                                                metric=metric, value=value))
        return path

    def load_best(self, job: Job) -> bool:
        """The newest whole best checkpoint's weights into every rank's model (rank 0 chooses it)."""
        path = share(self.ctx, _newest_whole(job.store, job.run_id, "best") if self.ctx.main else None)
        if path is None:
            return False
        weights = _load_into(job, Path(path), prefix="model.")
        job.model.load_state_dict({k.removeprefix("model."): v for k, v in weights.items()})
        return True


def _newest_whole(store: Any, run_id: int, kind: str) -> str | None:
    for row in store.checkpoint_candidates(run_id, kind):
        try:
            verify_sharded(row.path, step=row.step) if Path(row.path).is_dir() else verify_checkpoint(
                row.path, step=row.step)
            return str(row.path)
        except CheckpointError as exc:
            print(f"warning: run {run_id}: skipping the checkpoint of step {row.step}: {exc}", file=sys.stderr,
                  flush=True)
    return None


def _like(job: Job) -> dict[str, torch.Tensor]:
    """This run's tensors under checkpoint names: where each loaded tensor goes, and its layout."""
    like = {f"model.{k}": v for k, v in job.model.state_dict().items()}
    params = [p for g in job.opt.param_groups for p in g["params"]]
    for i, p in enumerate(params):
        for key in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq", "momentum_buffer", "square_avg", "grad_avg"):
            like[f"optim.{i}.{key}"] = p.detach()
    return like


def _load_into(job: Job, path: Path, prefix: str = "") -> dict[str, torch.Tensor]:
    """A checkpoint (sharded folder or one-process file) in this run's layout."""
    like = _like(job)
    if path.is_dir():
        return load_sharded(path, like, prefix=prefix)
    tensors, _ = verify_checkpoint(path)
    return to_layout({k: v for k, v in tensors.items() if k.startswith(prefix)}, like)


def restore_from(job: Job, path: Path) -> None:
    """Continue from ``path``, written by any number of ranks (or one process)."""
    meta = verify_sharded(path) if path.is_dir() else verify_checkpoint(path)[1]
    restore(job, (_load_into(job, path), meta))


def make_rank_job(st: Any, model: torch.nn.Module, ctx: Context, *, store: Any, emitter: ev.Emitter, run_id: int,
                  run_dir: Path, controls: Controls) -> Job:
    """The job of one rank: the model wrapped for the strategy, this rank's loaders, the window
    all-reduced. Live inspection and memory recording run eager steps of one rank: not here."""
    spec, dev = st.spec, st.device
    if ctx.strategy == "fsdp2":
        model = shard_fsdp2(model, st.graph, spec.distributed, ctx)
        runner = model
    else:
        runner = wrap_ddp(model, ctx)
    compiled = spec.precision.compile != "off"
    opt = make_optimizer(model, spec.optim, lr_tensor=compiled, device=dev, scales=lr_scales(model, st.graph, spec.model))
    if compiled:
        # torch.compile of a module returns an OptimizedModule (an nn.Module); the stub says a plain callable
        runner = torch.compile(runner, mode=spec.precision.compile)  # type: ignore[assignment]
    step_fn, scaler = make_train_step(runner, opt, device=dev, precision=spec.precision.dtype,
                                      label_smoothing=spec.optim.label_smoothing, compile_mode=spec.precision.compile)
    loaders = start_loaders(rank_loaders(st, ctx.rank, ctx.world))
    schedule = Schedule(spec.optim.lr, spec.schedule, loaders["train"].steps, spec.train.epochs)
    job = Job(st, store, emitter, run_id, run_dir, model, runner, opt, step_fn, scaler, schedule, loaders, controls,
              Window(reduce=window_reduce(ctx)))
    job.dist = RankRole(ctx)
    job.callbacks = core_callbacks(job)
    if compiled:
        job.step_fn = _timed_first_call(job, step_fn)    # compile_done from rank 0, as on one device
    return job


class _Run:
    """What a failing rank reports from: its job (once made) and the run's folder."""

    def __init__(self, folder: Path | None) -> None:
        self.job: Job | None = None
        self.folder = folder


def run_rank(spec_path: str, *, db: str | None, run_dir: str | None, run_id: int | None, resume_from: str | None,
             emitter: ev.Emitter) -> int:
    """This rank's whole run; the exit status (what torchrun and the launcher read)."""
    launched = run_id is not None
    rank = int(os.environ["RANK"])
    run = _Run(Path(run_dir) if run_dir else None)
    if rank != 0:
        emitter = ev.Emitter(open(os.devnull, "w"))  # noqa: SIM115 - for the process's life
    try:
        _train(run, rank, spec_path, db=db, run_dir=run_dir, run_id=run_id, resume_from=resume_from,
               emitter=emitter)
        run.job = None    # with _train's frame gone, nothing of the run holds the model or its groups
        close()
        return ev.EXIT_OK
    except NonFiniteLoss as exc:
        return _failed(run.job, rank, run.folder, launched, "nan", f"{exc}: training diverged (try a lower optim.lr)",
                       step=exc.step)
    except torch.OutOfMemoryError as exc:
        return _failed(run.job, rank, run.folder, launched, "oom", f"out of memory: {exc}", tb=traceback.format_exc())
    except BaseException as exc:  # noqa: BLE001 - reported (by file or by rank 0), never lost
        if isinstance(exc, SystemExit):
            raise
        own = own_error(exc, rank)   # DCP's CheckpointException is a BaseException wrapping each rank's
        return _failed(run.job, rank, run.folder, launched, "error", f"{type(own).__name__}: {first_line(own)}",
                       tb=traceback.format_exc(), peer=is_peer_error(own))


def _train(run: _Run, rank: int, spec_path: str, *, db: str | None, run_dir: str | None, run_id: int | None,
           resume_from: str | None, emitter: ev.Emitter) -> None:
    """Set up, train and finish this rank's part of the run. Every reference to the process groups (the
    context, the wrapped model, the job and the closures over it) lives in this frame or in the job, so
    that once it returns :func:`close` can free them: the groups' gloo threads then end while Python is
    whole (issue 22's SIGABRT: left to the interpreter's teardown, a gloo thread freeing a tensor asked
    for the GIL of a finalizing interpreter and the process died, "terminate called without an active
    exception")."""
    launched = run_id is not None
    st = setup(load_spec(spec_path))
    start_loader_helper(st)    # its imports overlap the process group's start and the build
    ctx = init(st.spec.distributed, st.device)
    st.device = ctx.device
    model = build_model(st)
    store: Any = RunStore(db) if ctx.main else NullStore()
    if not launched:       # started by torchrun itself: rank 0 creates the run
        run_id, run.folder = share(ctx, _create_run(store, st, model, spec_path, run_dir) if ctx.main else None)
    assert run.folder is not None and run_id is not None
    note_alive(run.folder, rank)    # a resume refuses while this process lives
    emitter.run_id = run_id
    controls = Controls(lambda state, reason: emitter.emit(ev.State(state=state, reason=reason)))
    job = run.job = make_rank_job(st, model, ctx, store=store, emitter=emitter, run_id=run_id, run_dir=run.folder,
                                  controls=controls)
    if resume_from:
        restore_from(job, Path(resume_from))
    if ctx.main:
        controls.listen()
        recorder = job.recorder

        def on_state(state: str, reason: str) -> None:
            recorder.flush()
            emitter.emit(ev.State(state=state, reason=reason))
        controls.on_state = on_state
    controls.install_sigterm()   # on every rank: a SIGTERM ends the run at rank 0's next step
    _started(job, ctx)
    finish(job, run_epochs(job), job.elapsed())   # every part of a resumed run
    job.recorder.close()         # its thread ends (it held the last write, and so the job)


def own_error(exc: BaseException, rank: int) -> BaseException:
    """The error behind ``exc`` on this rank: a sharded save or load raises one CheckpointException on
    every rank, holding each rank's own exception (this rank's, else the lowest failed rank's)."""
    from torch.distributed.checkpoint.api import CheckpointException

    if isinstance(exc, CheckpointException) and exc.failures:
        inner, _ = exc.failures.get(rank) or exc.failures[min(exc.failures)]
        return inner
    return exc


def _create_run(store: RunStore, st: Any, model: torch.nn.Module, spec_path: str,
                run_dir: str | None) -> tuple[int, Path]:
    run_id = store.create_run(name=st.spec.name or Path(spec_path).stem, spec=stored_spec(st), graph=st.graph_dict,
                              graph_hash=st.graph_hash, device=str(st.device), params=count_params(model),
                              tags=st.spec.tags)
    folder = (Path(run_dir) if run_dir else default_run_dir(store, run_id)).resolve()
    store.update_run(run_id, run_dir=str(folder))
    return run_id, folder


def _started(job: Job, ctx: Context) -> None:
    st, s = job.setup, job.setup.splits
    job.emitter.emit(ev.RunStarted(
        name=st.spec.name, device=str(st.device), params=sum(p.numel() for p in job.model.parameters()),
        epochs=st.spec.train.epochs, steps_per_epoch=job.loaders["train"].steps, batch_size=st.spec.train.batch_size,
        train_size=len(s.train), val_size=len(s.val), test_size=len(s.test), classes=list(s.classes),
        start_step=job.step, precision=st.spec.precision.dtype, compile=st.spec.precision.compile,
        run_dir=str(job.run_dir), distributed=ctx.describe()))


def _failed(job: Job | None, rank: int, folder: Path | None, launched: bool, kind: str,
            message: str, *, step: int | None = None, tb: str = "", peer: bool = False) -> int:
    """Launched by us: write this rank's reason for the launcher. Under torchrun alone: rank 0 records
    the failure as a one-process run does."""
    if job is not None and rank == 0:
        with contextlib.suppress(Exception):   # the failure being reported matters more
            job.recorder.flush()     # the metrics up to the failure stay
    step = step if step is not None else (job.step if job is not None else None)
    if launched and folder is not None:
        write_failure(folder, rank, kind, message, step=step, tb=tb, peer=peer)
    elif rank == 0 and job is not None:
        fail(job, kind, f"rank 0: {message}", tb=tb, step=step, rank=0)
    print(f"error: rank {rank}: {message}", file=sys.stderr, flush=True)
    return ev.EXIT_FAILED     # the process group is left as it is: a peer may be gone, torchrun ends the rest
