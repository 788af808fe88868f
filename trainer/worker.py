"""The worker process: ``python -m trainer run SPEC.json [--db URL] [--run-dir DIR]``.

Also ``python -m trainer resume RUN_ID [--db URL]``: continue a stopped, failed or interrupted run
from its last checkpoint, as the same run. The protocol (events out, commands in, exit status) is
described in :mod:`trainer.events`. The worker never imports Qt and needs no GUI.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from pathlib import Path

import torch

from graph_editor.build import BuildError

from . import events as ev
from .checks import Setup, setup
from .controls import Controls
from .job import (
    Job,
    build_model,
    emit_memory,
    evaluate_split,
    load_best_weights,
    make_job,
    restore,
    run_epochs,
)
from .loop import NonFiniteLoss
from .memory import memory_sample
from .spec import SpecError, load_spec, spec_from_dict
from .store import RunStore, StoreError, default_run_root


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer", description="Torch Studio's training worker.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="start a run from a spec file")
    p.add_argument("spec", help="a run spec (JSON)")
    p.add_argument("--db", help="SQLAlchemy URL of the run store (default: $TORCH_STUDIO_DB or the user data dir)")
    p.add_argument("--run-dir", help="folder for this run's checkpoints (default: beside the store)")
    p = sub.add_parser("resume", help="continue a run from its last checkpoint")
    p.add_argument("run_id", type=int)
    p.add_argument("--db", help="SQLAlchemy URL of the run store")
    args = parser.parse_args(argv)
    emitter = ev.Emitter()
    if args.command == "run":
        return run_spec_file(args.spec, db=args.db, run_dir=args.run_dir, emitter=emitter)
    return resume_run(args.run_id, db=args.db, emitter=emitter)


def refuse(emitter: ev.Emitter, kind: str, message: str, problems: list[str] | None = None) -> int:
    """Nothing ran: report the problem (event and stderr) and exit with EXIT_REFUSED."""
    emitter.emit(ev.FAILED, kind=kind, message=message, problems=problems or [message], traceback="", step=None)
    print(f"error: {message}", file=sys.stderr, flush=True)
    return ev.EXIT_REFUSED


def refuse_setup(emitter: ev.Emitter, exc: SpecError | BuildError | torch.OutOfMemoryError) -> int:
    """Refuse a run whose spec, graph or weights' placement on the device failed."""
    if isinstance(exc, SpecError):
        return refuse(emitter, "spec", str(exc), exc.problems)
    if isinstance(exc, BuildError):
        return refuse(emitter, "graph", f"model.graph: {exc}")
    return refuse(emitter, "oom", f"model.graph: the model's weights do not fit in the device's memory: {exc}")


def run_spec_file(path: str, *, db: str | None, run_dir: str | None, emitter: ev.Emitter) -> int:
    """Check the spec, create the run in the store, train. Returns the exit status."""
    try:
        st = setup(load_spec(path))
        model = build_model(st)
        store = RunStore(db)
    except (SpecError, BuildError, torch.OutOfMemoryError) as exc:
        return refuse_setup(emitter, exc)
    except StoreError as exc:
        return refuse(emitter, "spec", f"--db: {exc}")
    spec_record = stored_spec(st)
    run_id = store.create_run(name=st.spec.name or Path(path).stem, spec=spec_record, graph=st.graph_dict,
                              graph_hash=st.graph_hash, device=str(st.device), params=count_params(model))
    folder = Path(run_dir) if run_dir else default_run_dir(store, run_id)
    store.update_run(run_id, run_dir=str(folder.resolve()))
    return execute(st, model, store, emitter, run_id, folder.resolve(), checkpoint=None)


def resume_run(run_id: int, *, db: str | None, emitter: ev.Emitter) -> int:
    """Continue ``run_id`` from its last checkpoint, as the same run."""
    try:
        store = RunStore(db)
        run = store.run(run_id)
    except StoreError as exc:
        return refuse(emitter, "spec", str(exc))
    if run.status == "running":
        return refuse(emitter, "spec", f"run {run_id} is still running (pid {run.pid} on {run.host})")
    checkpoint = store.checkpoint_path(run_id, "last")
    if checkpoint is None:
        return refuse(emitter, "spec", f"run {run_id} has no last checkpoint to resume from")
    try:
        st = setup(spec_from_dict(run.spec))
        model = build_model(st)
    except (SpecError, BuildError, torch.OutOfMemoryError) as exc:
        return refuse_setup(emitter, exc)
    store.claim(run_id)
    return execute(st, model, store, emitter, run_id, Path(run.run_dir), checkpoint=checkpoint)


def stored_spec(st: Setup) -> dict:
    """The spec as run: the graph embedded (with the data's input shape) and the dataset path absolute."""
    spec = st.spec.to_dict()
    spec["model"]["graph"] = st.graph_dict
    if spec["data"]["dataset"] != "digits" and spec["data"]["format"] != "digits":
        spec["data"]["dataset"] = str(st.spec.resolve(spec["data"]["dataset"]).resolve())
    return spec


def count_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def default_run_dir(store: RunStore, run_id: int) -> Path:
    """Beside a SQLite store (``<db folder>/runs/run-N``), else in the user data directory."""
    if store.url.startswith("sqlite:///") and store.url != "sqlite:///:memory:":
        return Path(store.url.removeprefix("sqlite:///")).expanduser().parent / "runs" / f"run-{run_id}"
    return default_run_root() / f"run-{run_id}"


def execute(st: Setup, model: torch.nn.Module, store: RunStore, emitter: ev.Emitter, run_id: int, run_dir: Path,
            *, checkpoint: Path | None) -> int:
    """Train the run to its end and record how it ended; never raises."""
    emitter.run_id = run_id
    controls = Controls(lambda state, reason: emitter.emit(ev.STATE, state=state, reason=reason))
    try:
        job = make_job(st, model, store=store, emitter=emitter, run_id=run_id, run_dir=run_dir, controls=controls)
        if checkpoint is not None:
            restore(job, checkpoint)
        controls.on_state = lambda state, reason: (job.recorder.flush(),
                                                   emitter.emit(ev.STATE, state=state, reason=reason))
    except Exception as exc:  # noqa: BLE001 - reported as a failed run, never lost
        message = f"cannot start the run: {type(exc).__name__}: {exc}"
        kind = "oom" if isinstance(exc, torch.OutOfMemoryError) else "error"   # the data did not fit, say
        store.finish(run_id, "failed", error_kind=kind, error=message)
        emitter.emit(ev.FAILED, kind=kind, message=message, traceback=traceback.format_exc(), step=None)
        print(f"error: {message}", file=sys.stderr, flush=True)
        return ev.EXIT_FAILED
    controls.listen()
    controls.install_sigterm()
    s = st.splits
    emitter.emit(ev.RUN_STARTED, name=st.spec.name, device=str(st.device), params=count_params(model),
                 epochs=st.spec.train.epochs, steps_per_epoch=job.loaders["train"].steps,
                 batch_size=st.spec.train.batch_size, train_size=len(s.train), val_size=len(s.val),
                 test_size=len(s.test), classes=s.classes, start_step=job.step, precision=st.spec.precision.dtype,
                 compile=st.spec.precision.compile, run_dir=str(run_dir))
    t0 = time.perf_counter()
    try:
        status = run_epochs(job)
        finish(job, status, time.perf_counter() - t0)
        return ev.EXIT_OK
    except NonFiniteLoss as exc:
        fail(job, "nan", f"{exc}: training diverged (try a lower optim.lr)", step=exc.step)
    except torch.OutOfMemoryError as exc:
        figures = memory_sample(st.device)
        fail(job, "oom", f"out of memory on {st.device} (peak {figures.get('peak', 0) / 2**20:.0f} MiB): {exc}",
             tb=traceback.format_exc(), memory=figures)
    except Exception as exc:  # noqa: BLE001 - any crash is reported as a failed run, never lost
        fail(job, "error", f"{type(exc).__name__}: {exc}", tb=traceback.format_exc())
    return ev.EXIT_FAILED


def finish(job: Job, status: str, seconds: float) -> None:
    """Test the best weights (unless stopped), record the end, emit ``finished``."""
    job.recorder.flush()
    test = None
    if status != "stopped":
        load_best_weights(job)
        test = evaluate_split(job, "test")
    best_metric = job.spec.checkpoints.metric
    best = job.best.get(best_metric)
    summary = {"test_loss": test.loss if test else None, "test_accuracy": test.accuracy if test else None,
               "test_per_class": test.per_class() if test else None,
               "test_confusion": test.confusion.tolist() if test else None,
               "best": {"metric": best_metric, "value": best[0], "epoch": int(best[1])} if best else None,
               "seconds": round(seconds, 3)}
    if test:
        job.store.add_metrics(job.run_id, [(job.step, "test/loss", test.loss), (job.step, "test/accuracy",
                                                                               test.accuracy)])
    emit_memory(job, job.step)
    job.store.update_run(job.run_id, epoch=job.epoch, step=job.step)
    job.store.finish(job.run_id, status, summary=summary)
    job.emitter.emit(ev.FINISHED, status=status, epoch=job.epoch, step=job.step, **summary)


def fail(job: Job, kind: str, message: str, *, tb: str = "", step: int | None = None, **extra: object) -> None:
    try:
        job.recorder.flush()    # what was written before the failure stays, and comes first
    except Exception as exc:  # noqa: BLE001 - the failure being reported matters more
        message += f" (and writing metrics failed: {exc})"
    job.store.update_run(job.run_id, epoch=job.epoch, step=job.step)
    job.store.finish(job.run_id, "failed", error_kind=kind, error=message)
    job.emitter.emit(ev.FAILED, kind=kind, message=message, traceback=tb, step=step if step is not None else job.step,
                     **extra)
    print(f"error: {message}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    raise SystemExit(main())

