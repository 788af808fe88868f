"""The worker process: ``python -m trainer run SPEC.json [--db URL] [--run-dir DIR]``.

Also ``python -m trainer resume RUN_ID [--db URL]``: continue a stopped, failed or interrupted run
from its last whole checkpoint, as the same run (a damaged newest checkpoint is skipped for the one
before it, and stderr says so). The protocol (events out, commands in, exit status) is described in
:mod:`trainer.protocol.events`. The worker never imports Qt and needs no GUI.

Whatever goes wrong before ``run_started`` is a refusal (exit 2, a ``failed`` event with
``problems``), never a traceback on the terminal: an unexpected exception keeps its traceback in
the event's ``traceback`` field only. Whatever goes wrong after it ends the run ``failed`` (exit 1),
even when the store cannot record the failure (a full disk): the event still goes out.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import signal
import sys
import traceback
from pathlib import Path
from typing import Any

import torch

from graph_editor.model.units import mib

from .checkpoints.saving import restore, write_held
from .checkpoints.single_file import CheckpointError, discard_after, verify_checkpoint
from .checks import Setup, setup
from .compilation import recipes as warm
from .distributed import launch as dist_launch
from .distributed.lifeline import is_torchrun_child
from .job import (
    build_model,
    make_job,
    run_epochs,
    start_loader_helper,
)
from .loop import NonFiniteLoss
from .memory.doctor import gate as memory_gate
from .memory.samples import memory_sample
from .protocol import events as ev
from .protocol.controls import Controls
from .run_outcome import (  # noqa: F401  (public here too: trainer.worker.refuse, default_run_dir, ...)
    SETUP_ERRORS,
    count_params,
    default_run_dir,
    fail,
    finish,
    first_line,
    open_for_resume,
    record_failure,
    refuse,
    refuse_setup,
    stored_spec,
)
from .spec import STRATEGIES, load_spec, spec_from_dict
from .store.runs import RunStore, StoreError

_EARLY_STOP: list[str] = []    # a SIGINT/SIGTERM that came before the run's own handlers


def main(argv: list[str] | None = None, *, early_signals: list[str] | None = None) -> int:
    """The worker's command line; ``early_signals`` are stop signals noted before this was imported."""
    # A native crash (SIGSEGV, SIGABRT) leaves every thread's stack on stderr; a stderr without a file
    # descriptor (main() called in a process whose stderr is captured) has nowhere to put it.
    with contextlib.suppress(ValueError, AttributeError, OSError):   # io.UnsupportedOperation is both
        faulthandler.enable(all_threads=True)
    for sig in (signal.SIGINT, signal.SIGTERM):   # from the first line: no KeyboardInterrupt traceback, ever
        signal.signal(sig, lambda signum, _frame: _EARLY_STOP.append(signal.Signals(signum).name))
    _EARLY_STOP.extend(early_signals or [])
    parser = argparse.ArgumentParser(prog="python -m trainer", description="Torch Studio's training worker.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="start a run from a spec file")
    p.add_argument("spec", help="a run spec (JSON)")
    p.add_argument("--db", help="SQLAlchemy URL of the run store (default: $TORCH_STUDIO_DB or the user data dir)")
    p.add_argument("--run-dir", help="folder for this run's checkpoints (default: beside the store)")
    p.add_argument("--predicted-peak", type=int, help="the peak (bytes) the studio predicted for this spec: "
                   "the memory gate compares it with the budget instead of predicting again")
    p.add_argument("--run-id", type=int, help=argparse.SUPPRESS)        # a rank started by our launcher
    p.add_argument("--resume-from", help=argparse.SUPPRESS)            # its checkpoint, on a resume
    p = sub.add_parser("resume", help="continue a run from its last checkpoint")
    p.add_argument("run_id", type=int)
    p.add_argument("--db", help="SQLAlchemy URL of the run store")
    p.add_argument("--distributed", choices=STRATEGIES, help="resume with another strategy (none: in this process)")
    p.add_argument("--nproc-per-node", type=int, help="resume with another number of processes")
    args = parser.parse_args(argv)
    emitter = ev.Emitter()
    try:
        if args.command == "run":
            if is_torchrun_child():   # a rank, started by our launcher or by torchrun itself
                from .distributed.rank import run_rank

                return run_rank(args.spec, db=args.db, run_dir=args.run_dir, run_id=args.run_id,
                                resume_from=args.resume_from, emitter=emitter)
            if dist_launch.wants_torchrun(args.spec):
                return dist_launch.launch_run(args.spec, db=args.db, run_dir=args.run_dir, emitter=emitter)
            return run_spec_file(args.spec, db=args.db, run_dir=args.run_dir, emitter=emitter,
                                 predicted_peak=args.predicted_peak)
        plan = dist_launch.resume_plan(args.run_id, args.db, args.distributed, args.nproc_per_node)
        if plan is not None:
            return dist_launch.resume(args.run_id, plan, db=args.db, emitter=emitter)
        return resume_run(args.run_id, db=args.db, emitter=emitter)
    except Exception as exc:  # noqa: BLE001 - before run_started anything unforeseen is a refusal, not a traceback
        return refuse(emitter, "error", f"cannot start the run: {type(exc).__name__}: {first_line(exc)}",
                      tb=traceback.format_exc())


def run_spec_file(path: str, *, db: str | None, run_dir: str | None, emitter: ev.Emitter,
                  predicted_peak: int | None = None) -> int:
    """Check the spec, create the run in the store, train. Returns the exit status. ``predicted_peak``:
    the studio's prediction of this spec, which the memory gate takes instead of predicting again."""
    try:
        store = RunStore(db)     # first: a bad --db is refused before the data is loaded
    except StoreError as exc:
        return refuse(emitter, "spec", f"--db: {exc}")
    if predicted_peak is not None and predicted_peak <= 0:
        return refuse(emitter, "spec", f"--predicted-peak: {predicted_peak} is not a number of bytes (above 0)")
    try:
        st = setup(load_spec(path))
        start_loader_helper(st)    # its imports overlap the memory gate and the build
        peak, unmodelled, too_big = memory_gate(st, predicted_peak)
        if too_big is not None:    # predicted not to fit: refused with the fixes
            return refuse(emitter, "oom", f"out of memory: {too_big.message()}", too_big.problems(),
                          diagnosis=too_big.to_dict())
        model = build_model(st)
    except SETUP_ERRORS as exc:
        return refuse_setup(emitter, exc)
    try:
        _record_the_dead(store)
        run_id = store.create_run(name=st.spec.name or Path(path).stem, spec=stored_spec(st), graph=st.graph_dict,
                                  graph_hash=st.graph_hash, device=str(st.device), params=count_params(model),
                                  tags=st.spec.tags)
        folder = (Path(run_dir) if run_dir else default_run_dir(store, run_id)).resolve()
        store.update_run(run_id, run_dir=str(folder))
    except StoreError as exc:
        return refuse(emitter, "spec", f"--db: {exc}")
    return execute(st, model, store, emitter, run_id, folder, checkpoint=None,
                   predicted_peak=peak, predicted_unmodelled=unmodelled)


def _record_the_dead(store: RunStore) -> None:
    """Record dead workers' runs as interrupted while we can write (readers only show them so)."""
    with contextlib.suppress(StoreError):   # creating the run says what is wrong with the store
        store.mark_interrupted()


def resume_run(run_id: int, *, db: str | None, emitter: ev.Emitter) -> int:
    """Continue ``run_id`` from its last whole checkpoint, as the same run."""
    opened = open_for_resume(run_id, db=db, emitter=emitter)
    if isinstance(opened, int):
        return opened
    store, run = opened
    checkpoint = usable_checkpoint(store, run_id)
    if checkpoint is None:
        return refuse(emitter, "spec", f"run {run_id} has no whole last checkpoint to resume from")
    try:
        st = setup(spec_from_dict(run.spec))
        start_loader_helper(st)
        model = build_model(st)
    except SETUP_ERRORS as exc:
        return refuse_setup(emitter, exc)
    meta = checkpoint[1]
    try:
        store.claim(run_id)
        store.rewind(run_id, meta["step"], meta["epoch"])   # what came after the checkpoint is trained again
    except StoreError as exc:
        return refuse(emitter, "spec", f"--db: {exc}")
    discard_after(Path(run.run_dir) / "checkpoints", meta["step"])
    return execute(st, model, store, emitter, run_id, Path(run.run_dir), checkpoint=checkpoint)


def usable_checkpoint(store: RunStore, run_id: int) -> tuple[dict[str, torch.Tensor], dict[str, Any]] | None:
    """The newest ``last`` checkpoint of ``run_id`` that verifies (tensors and metadata), or None;
    each one skipped is reported on stderr."""
    for row in store.checkpoint_candidates(run_id, "last"):
        try:
            return verify_checkpoint(row.path, step=row.step)
        except CheckpointError as exc:
            print(f"warning: run {run_id}: skipping the checkpoint of step {row.step}: {exc}; trying the one "
                  "before it", file=sys.stderr, flush=True)
    return None


def execute(st: Setup, model: torch.nn.Module, store: RunStore, emitter: ev.Emitter, run_id: int, run_dir: Path,
            *, checkpoint: tuple[dict[str, torch.Tensor], dict[str, Any]] | None,
            predicted_peak: int | None = None, predicted_unmodelled: int = 0) -> int:
    """Train the run to its end and record how it ended; never raises. ``predicted_peak``: the memory
    gate's prediction, reported in ``run_started`` (the dashboard draws it instead of predicting again),
    with ``predicted_unmodelled``, the bytes it may be under (this CPU's bf16 kernels)."""
    emitter.run_id = run_id
    controls = Controls(lambda state, reason: emitter.emit(ev.State(state=state, reason=reason)))
    try:
        job = make_job(st, model, store=store, emitter=emitter, run_id=run_id, run_dir=run_dir, controls=controls)
        if checkpoint is not None:
            restore(job, checkpoint)

        def on_state(state: str, reason: str) -> None:
            if state == "paused":
                write_held(job)     # a paused run may be closed: its epochs are on disk first
            job.recorder.flush()
            emitter.emit(ev.State(state=state, reason=reason))
        controls.on_state = on_state
    except Exception as exc:  # noqa: BLE001 - reported as a failed run, never lost
        message = f"cannot start the run: {type(exc).__name__}: {exc}"
        kind = "oom" if isinstance(exc, torch.OutOfMemoryError) else "error"   # the data did not fit, say
        tb = traceback.format_exc()
        message = record_failure(store, run_id, kind, message, tb=tb)
        emitter.emit(ev.Failed(kind=kind, message=message, traceback=tb, step=None))
        print(f"error: {message}", file=sys.stderr, flush=True)
        return ev.EXIT_FAILED
    controls.listen()
    controls.install_sigterm()
    controls.sigterm = controls.sigterm or bool(_EARLY_STOP)   # a stop that came during startup
    s = st.splits
    compiled = st.spec.precision.compile != "off"
    expected = warm.index().seconds(warm.setup_key(st)) if compiled else None   # None: the first time
    emitter.emit(ev.RunStarted(
        name=st.spec.name, device=str(st.device), params=count_params(model), epochs=st.spec.train.epochs,
        steps_per_epoch=job.loaders["train"].steps, batch_size=st.spec.train.batch_size, train_size=len(s.train),
        val_size=len(s.val), test_size=len(s.test), classes=list(s.classes), start_step=job.step,
        precision=st.spec.precision.dtype, compile=st.spec.precision.compile, run_dir=str(run_dir),
        predicted_peak=predicted_peak, predicted_unmodelled=predicted_unmodelled if predicted_peak else None,
        compile_first_time=(expected is None) if compiled else None,
        compile_expected_s=expected))
    try:
        status = run_epochs(job)
        write_held(job)         # an early stop's epoch, held: its checkpoint
        job.recorder.flush()    # the last epoch's checkpoint, written off the training thread, is run time too
        finish(job, status, job.elapsed())   # every part of a resumed run, not the gaps between them
        return ev.EXIT_OK
    except NonFiniteLoss as exc:
        fail(job, "nan", f"{exc}: training diverged (try a lower optim.lr)", step=exc.step)
    except torch.OutOfMemoryError as exc:
        figures = memory_sample(st.device)
        fail(job, "oom", f"out of memory on {st.device} (peak {mib(figures.peak or 0, 0)}): {exc}",
             tb=traceback.format_exc(), memory=figures.counters())
    except Exception as exc:  # noqa: BLE001 - any crash is reported as a failed run, never lost
        fail(job, "error", f"{type(exc).__name__}: {exc}", tb=traceback.format_exc())
    return ev.EXIT_FAILED


if __name__ == "__main__":
    raise SystemExit(main())

