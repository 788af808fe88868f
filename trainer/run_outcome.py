"""How a run is refused, recorded and ended -- shared by the one-process worker (:mod:`trainer.worker`)
and the torchrun launcher and ranks (:mod:`trainer.distributed.launch`, :mod:`trainer.distributed.rank`): the
refusal before anything ran (exit 2, a ``failed`` event with ``problems``), the spec and folder a new
run is stored with, the end of a run (``finished``) and its failure (``failed``, even when the store
cannot record it). Its own module, so the distributed entry points need nothing back from the worker
that dispatches to them."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch

from graph_editor.building import BuildError

from .callbacks.reporting import emit_memory
from .checkpoints.saving import load_best_weights, write_held
from .checks import Setup
from .data import DataError
from .distributed.lifeline import live_ranks
from .job import Job, evaluate_split
from .metrics.names import rows as metric_rows
from .protocol import events as ev
from .spec import SpecError
from .store.runs import Run, RunStore, StoreError, default_run_root


def refuse(emitter: ev.Emitter, kind: str, message: str, problems: list[str] | None = None, *,
           tb: str = "", diagnosis: dict[str, Any] | None = None) -> int:
    """Nothing ran: report the problem (event and stderr, one line) and exit with EXIT_REFUSED."""
    emitter.emit(ev.Failed(kind=kind, message=message, problems=problems or [message], traceback=tb, step=None,
                           diagnosis=diagnosis))
    print(f"error: {message}", file=sys.stderr, flush=True)
    return ev.EXIT_REFUSED


def first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else ""


SETUP_ERRORS = (SpecError, DataError, BuildError, torch.OutOfMemoryError)


def refuse_setup(emitter: ev.Emitter, exc: SpecError | DataError | BuildError | torch.OutOfMemoryError) -> int:
    """Refuse a run whose spec, data, graph or weights' placement on the device failed."""
    if isinstance(exc, SpecError):
        return refuse(emitter, "spec", str(exc), exc.problems)
    if isinstance(exc, DataError):
        return refuse(emitter, "data", f"data.dataset: {exc}")
    if isinstance(exc, BuildError):
        return refuse(emitter, "graph", f"model.graph: {exc}")
    return refuse(emitter, "oom", f"model.graph: the model's weights do not fit in the device's memory: {exc}")


def open_for_resume(run_id: int, *, db: str | None, emitter: ev.Emitter) -> tuple[RunStore, Run] | int:
    """The store and the run to resume (one process or under torchrun), or the exit status of the
    refusal already emitted: no such store or run, the run still running, a read-only store."""
    try:
        store = RunStore(db, create=False)
        run = store.run(run_id)
    except StoreError as exc:
        return refuse(emitter, "spec", str(exc))
    if run.status == "running":
        return refuse(emitter, "spec", f"run {run_id} is still running (pid {run.pid} on {run.host})")
    if ranks := live_ranks(run.run_dir):      # its launcher is gone, but a rank of it still trains
        rank, pid = ranks[0]
        return refuse(emitter, "spec", f"run {run_id} is still running: its rank {rank} (pid {pid}) lives")
    if store.readonly:
        return refuse(emitter, "spec", f"--db: {store.url}: the run store is read-only; a resumed run records "
                                       "its progress there")
    return store, run


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
    """Beside a SQLite store: ``<db folder>/runs/run-N`` for the usual ``runs.sqlite``, ``<db folder>/
    <stem>-runs/run-N`` for another name (two stores in one folder never share a run's checkpoints);
    else in the user data directory (a server's store: in a folder named after it)."""
    if store.url.startswith("sqlite:///") and store.url != "sqlite:///:memory:":
        db = Path(store.url.removeprefix("sqlite:///")).expanduser()
        return db.parent / ("runs" if db.stem == "runs" else f"{db.stem}-runs") / f"run-{run_id}"
    return default_run_root() / store.folder_name() / f"run-{run_id}"


def finish(job: Job, status: str, seconds: float) -> None:
    """Test the best weights (unless stopped), record the end, emit ``finished``. The checkpoints held are
    written before (``trainer.worker.execute``: their write is run time); a rank under torchrun holds none."""
    job.recorder.flush()
    test = None
    if status != "stopped":
        load_best_weights(job)
        test = evaluate_split(job, "test")
    best_metric = job.spec.checkpoints.metric
    best = job.best.get(best_metric)
    event = ev.Finished(status=status, epoch=job.epoch, step=job.step, test_loss=test.loss if test else None,
                        test_accuracy=test.accuracy if test else None,
                        test_per_class=ev.PerClass.from_dict(test.per_class()) if test else None,
                        test_confusion=test.confusion.tolist() if test else None,
                        best=ev.Best(best_metric, best[0], int(best[1])) if best else None, seconds=round(seconds, 3))
    job.store.add_metrics(job.run_id, metric_rows(event, job.step))
    emit_memory(job, job.step)
    job.store.update_run(job.run_id, epoch=job.epoch, step=job.step)
    job.store.finish(job.run_id, status, summary=event.summary())
    job.emitter.emit(event)


def fail(job: Job, kind: str, message: str, *, tb: str = "", step: int | None = None,
         memory: dict[str, Any] | None = None, rank: int | None = None) -> None:
    """Record and report a failed run. The event goes out even when the store cannot record it."""
    try:
        write_held(job)         # the epochs before the failure can be resumed from
        job.recorder.flush()    # what was written before the failure stays, and comes first
    except Exception as exc:  # noqa: BLE001 - the failure being reported matters more
        message += f" (and writing metrics failed: {first_line(exc)})"
    message = record_failure(job.store, job.run_id, kind, message, tb=tb, epoch=job.epoch, step=job.step)
    job.emitter.emit(ev.Failed(kind=kind, message=message, traceback=tb, step=step if step is not None else job.step,
                               memory=memory, rank=rank))
    print(f"error: {message}", file=sys.stderr, flush=True)


def record_failure(store: RunStore, run_id: int, kind: str, message: str, *, tb: str = "", **progress: int) -> str:
    """Mark the run failed, its traceback (if any) kept in its summary; when the store cannot take it
    (full disk, read-only, locked too long) the message says so, and the run reads 'interrupted' once
    this process is gone."""
    try:
        store.finish(run_id, "failed", error_kind=kind, error=message, summary={"traceback": tb} if tb else None,
                     **progress)
    except Exception as exc:  # noqa: BLE001 - the failed event must still go out
        message += f" (and recording the failure in the run store failed: {first_line(exc)})"
    return message


def default_run_name(source: str) -> str:
    """The name of a run not named by its user, from the graph it trains: ``lenet5.graph.json`` (its
    file, or the template it was made from) -> ``lenet5``; a graph with no file keeps the title the
    studio gives it ("Untitled"). The command line and the studio both name runs through this."""
    name = Path(source.strip()).name if source.strip().endswith(".json") else source.strip()
    name = name.removesuffix(".json").removesuffix(".graph")
    return name or "Untitled"
