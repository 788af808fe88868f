"""The launcher of a torchrun run: ``python -m trainer run SPEC`` (or ``resume RUN_ID``) for a spec
whose ``distributed.strategy`` is ddp or fsdp2, outside torchrun.

It refuses what it can before anything starts (the spec, the data, the graph, the FSDP2 units), then
creates the run (one run in the store, whatever the number of ranks, under this process's pid),
writes the spec as stored for the ranks, and starts them through torchrun's own parser and elastic
agent (:func:`trainer.distributed.launch`). Rank 0 speaks (events on the same stdout) and writes the
store; commands on stdin reach rank 0. When a rank fails, torchrun stops the others, and this
process records the run ``failed`` with the rank that failed first and its reason
(:func:`trainer.distributed.parallel.root_cause`) and emits the ``failed`` event.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import traceback
from pathlib import Path
from typing import Any

from ..checkpoints.common import remove_unfinished
from ..checkpoints.single_file import CheckpointError, discard_after, verify_checkpoint
from ..checks import Setup, setup
from ..job import build_model
from ..memory.recomputation import SegmentError
from ..protocol import events as ev
from ..run_outcome import (
    SETUP_ERRORS,
    count_params,
    default_run_dir,
    open_for_resume,
    record_failure,
    refuse,
    refuse_setup,
    stored_spec,
)
from ..spec import SpecError, load_spec, spec_from_dict
from ..store.runs import ENV_VAR, RunStore, StoreError
from .parallel import RANKS_DIR, extra_ranks_note, fsdp_units, launch, root_cause


def wants_torchrun(spec_path: str) -> bool:
    """Whether the spec asks for ranks (a spec that cannot be read goes the usual way, to its refusal)."""
    try:
        return load_spec(spec_path).distributed.strategy != "none"
    except SpecError:
        return False


def _check(st: Setup) -> None:
    """What the ranks would refuse, refused here: FSDP2 units that are not in the graph."""
    if st.spec.distributed.strategy == "fsdp2":
        try:
            fsdp_units(st.graph, build_model(st), st.spec.distributed.fsdp_units)
        except SegmentError as exc:
            raise SpecError([str(exc)]) from None


def launch_run(spec_path: str, *, db: str | None, run_dir: str | None, emitter: ev.Emitter) -> int:
    """Check, create the run, start the ranks, record how they ended; the exit status."""
    try:
        store = RunStore(db)
    except StoreError as exc:
        return refuse(emitter, "spec", f"--db: {exc}")
    try:
        st = setup(load_spec(spec_path))
        _check(st)
        model = build_model(st)
    except SETUP_ERRORS as exc:
        return refuse_setup(emitter, exc)
    try:
        spec = stored_spec(st)
        run_id = store.create_run(name=st.spec.name or Path(spec_path).stem, spec=spec, graph=st.graph_dict,
                                  graph_hash=st.graph_hash, device=str(st.device), params=count_params(model),
                                  tags=st.spec.tags)
        folder = (Path(run_dir) if run_dir else default_run_dir(store, run_id)).resolve()
        store.update_run(run_id, run_dir=str(folder))
    except StoreError as exc:
        return refuse(emitter, "spec", f"--db: {exc}")
    return supervise(store, emitter, run_id, folder, spec, resume_from=None)


def supervise(store: RunStore, emitter: ev.Emitter, run_id: int, folder: Path, spec: dict[str, Any], *,
              resume_from: str | None) -> int:
    """Start the ranks through torchrun and record how they ended."""
    from torch.distributed.elastic.multiprocessing.api import SignalException

    from ..spec import DistributedSpec

    ranks = folder / RANKS_DIR
    shutil.rmtree(ranks, ignore_errors=True)      # an earlier attempt's failure records and logs
    ranks.mkdir(parents=True)
    spec_file = ranks / "spec.json"
    spec_file.write_text(json.dumps(spec), encoding="utf-8")
    # the store's URL reaches the ranks in their environment, not on their command line: a password in it
    # would be in every rank's `ps` line and in torchrun's own logs of what it started
    os.environ[ENV_VAR] = store.url
    args = ["trainer", "run", str(spec_file), "--run-dir", str(folder), "--run-id", str(run_id)]
    if resume_from:
        args += ["--resume-from", resume_from]
    emitter.run_id = run_id
    try:
        failures = launch(DistributedSpec(**spec["distributed"]), args, ranks / "logs")
    except SignalException as exc:        # a SIGTERM/SIGINT here: torchrun passed it to the ranks
        return _ended_by_signal(store, emitter, run_id, exc)
    except Exception as exc:  # noqa: BLE001 - the rendezvous or the agent failed: the run failed
        return report_failure(store, emitter, run_id, "error", f"torchrun: {type(exc).__name__}: {exc}",
                       tb=traceback.format_exc())
    finally:    # every rank has ended: a save that a failure or a kill cut short is garbage now
        remove_unfinished(folder / "checkpoints")
    if failures is None:
        if store.run(run_id).status == "running":   # every rank exited 0 but rank 0 recorded no end
            return report_failure(store, emitter, run_id, "error", "the ranks exited without recording the run's end")
        return ev.EXIT_OK
    cause = root_cause(failures, folder)
    return report_failure(store, emitter, run_id, cause.kind, cause.message + extra_ranks_note(failures, cause),
                   step=cause.step, tb=cause.traceback, rank=cause.rank)


def _ended_by_signal(store: RunStore, emitter: ev.Emitter, run_id: int, exc: Exception) -> int:
    run = store.run(run_id)
    if run.status in ("stopped", "completed", "early_stopped"):
        return ev.EXIT_OK
    if run.status == "running":
        return report_failure(store, emitter, run_id, "error", f"the ranks were ended by {exc}")
    return ev.EXIT_FAILED


def report_failure(store: RunStore, emitter: ev.Emitter, run_id: int, kind: str, message: str, *,
                   step: int | None = None, tb: str = "", rank: int | None = None) -> int:
    """End a distributed run failed: its reason and traceback in the store (what ``torch-studio show``
    prints), one ``failed`` event for whoever follows the launcher, and the reason on stderr; the exit code."""
    message = record_failure(store, run_id, kind, message, tb=tb)
    emitter.emit(ev.Failed(kind=kind, message=message, traceback=tb, step=step, rank=rank))
    print(f"error: {message}", file=sys.stderr, flush=True)
    return ev.EXIT_FAILED


# ---------------------------------------------------------------- resuming
def resume_plan(run_id: int, db: str | None, strategy: str | None, nproc: int | None) -> dict[str, Any] | None:
    """The stored spec with the resume's overrides when it runs under torchrun, else None (a
    one-process resume). Unknown runs and stores are left to the one-process path's refusals."""
    try:
        store = RunStore(db, create=False)
        spec = store.run(run_id).spec
    except StoreError:
        return None
    section = dict(spec.get("distributed") or {"strategy": "none"})
    if strategy is not None:
        section["strategy"] = strategy
    if nproc is not None:
        section["nproc_per_node"] = nproc
    return {**spec, "distributed": section} if section.get("strategy", "none") != "none" else None


def resume(run_id: int, spec: dict[str, Any], *, db: str | None, emitter: ev.Emitter) -> int:
    """Continue ``run_id`` under torchrun from its last whole checkpoint, as the same run; the number
    of ranks may differ from the run's (a sharded checkpoint is read into the new layout)."""
    opened = open_for_resume(run_id, db=db, emitter=emitter)
    if isinstance(opened, int):
        return opened
    store, run = opened
    try:
        st = setup(spec_from_dict(spec))
        _check(st)
    except SETUP_ERRORS as exc:
        return refuse_setup(emitter, exc)
    found = _last_whole(store, run_id)
    if found is None:
        return refuse(emitter, "spec", f"run {run_id} has no whole last checkpoint to resume from")
    path, meta = found
    try:
        store.claim(run_id)
        store.rewind(run_id, meta["step"], meta["epoch"])
    except StoreError as exc:
        return refuse(emitter, "spec", f"--db: {exc}")
    discard_after(Path(run.run_dir) / "checkpoints", meta["step"])
    return supervise(store, emitter, run_id, Path(run.run_dir), {**spec, "distributed": st.spec.to_dict()[
        "distributed"]}, resume_from=str(path))


def _last_whole(store: RunStore, run_id: int) -> tuple[Path, dict[str, Any]] | None:
    # imported here: torch.distributed.checkpoint would cost every worker seconds of imports
    from .sharded_checkpoints import verify_sharded

    for row in store.checkpoint_candidates(run_id, "last"):
        try:
            p = Path(row.path)
            return p, (verify_sharded(p, step=row.step) if p.is_dir() else verify_checkpoint(p, step=row.step)[1])
        except CheckpointError as exc:
            print(f"warning: run {run_id}: skipping the checkpoint of step {row.step}: {exc}; trying the one "
                  "before it", file=sys.stderr, flush=True)
    return None
