"""Run a sweep: trials of an Optuna study, each an ordinary worker run, up to N at a time.

One loop on one thread asks the study for a trial, puts its draw into a run spec and the graph,
and either prunes it at once (its predicted peak memory exceeds the budget: no worker starts) or
starts ``python -m trainer run`` for it. It then polls every running worker: each ``epoch_end``
reports the objective to the trial, and when Optuna's pruner says so the worker is told to stop.
A trial ends complete (its best epoch's value), pruned (with the rule and the epoch), or failed
(the worker's own message, or why it died); the study goes on.

CPU processes share the cores: each of the ``parallel`` workers gets ``cores // parallel`` threads
(:mod:`trainer.threads`). Workers die with the sweep (``die_with_parent``: SIGTERM, their clean
stop), and :meth:`Sweep.stop` stops them itself; either way their trials are failed as interrupted
and queued again, so the next sweep on the study runs them (:func:`trainer.sweep.study.recover_interrupted`).
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState

from graph_editor.model import graph_from_dict, graph_to_dict, load_graph
from graph_editor.model.units import mib

from ..memory.doctor import predict_for_spec
from ..memory.prediction import MemoryPredictionError
from ..protocol import events as ev
from ..protocol.client import WorkerClient
from ..spec import SpecError, spec_from_dict
from ..store.runs import RunStore, StoreError, default_url
from ..threads import SWITCH, usable_cores
from .space import Space, parse_space
from .study import (
    counted,
    load_study,
    make_pruner,
    mark_interrupted,
    open_storage,
    owner_tag,
    recover_interrupted,
    summary,
)

POLL_S = 0.1            # the loop's sleep when no worker said anything
STOP_GRACE_S = 120.0    # a stopped worker that has not ended after this long is killed

optuna.logging.set_verbosity(optuna.logging.WARNING)


@dataclass
class SweepPlan:
    """What to sweep: the graph, the data, the space and how many trials, how many at a time."""

    graph: str
    space: str
    trials: int
    data: str = "digits"
    parallel: int = 1
    epochs: int | None = None
    prune: str = "median"
    budget_bytes: int | None = None
    study: str = ""
    db: str | None = None
    metric: str = "val_accuracy"
    seed: int | None = None
    device: str = "auto"
    spec: dict[str, Any] = field(default_factory=dict)   # more run-spec fields every trial gets


def gpu_slots(device: str) -> int:
    """How many GPUs a sweep's trials spread over: every visible one for ``auto`` and ``cuda``; none for
    ``cpu`` or one named device (``cuda:1``: every trial there)."""
    if device not in ("auto", "cuda"):
        return 0
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def free_gpu(used: list[int | None], gpus: int) -> int | None:
    """The GPU for the next trial: the one the fewest running trials use (the lowest first), None without GPUs."""
    if gpus <= 0:
        return None
    return min(range(gpus), key=lambda g: (used.count(g), g))


@dataclass
class _Slot:
    trial: optuna.Trial
    params: dict[str, Any]
    worker: WorkerClient
    run_id: int | None = None
    best: float | None = None
    prune_reason: str = ""
    failure: str = ""
    finished: ev.Finished | None = None
    stop_sent_at: float | None = None
    gpu: int | None = None      # the GPU this trial runs on (one slot per GPU), None on the CPU


class Sweep:
    """One process's part in a study: ``run()`` until the study holds ``trials`` counted trials."""

    def __init__(self, plan: SweepPlan, *, log: Callable[[str], None] | None = None) -> None:
        """Check everything that can be checked before a trial starts (raises ValueError, naming it)."""
        if plan.trials < 1 or plan.parallel < 1:
            raise ValueError("--trials and --parallel must be at least 1")
        if plan.metric not in ("val_accuracy", "val_loss"):
            raise ValueError(f"metric: unknown '{plan.metric}' (choose val_accuracy, val_loss)")
        self.plan, self.log = plan, log or (lambda _line: None)
        self.url = plan.db or default_url()
        graph = load_graph(plan.graph)
        self.graph = graph_to_dict(graph)
        self.base = self._base_spec()
        try:
            spec_from_dict(self.base)
        except SpecError as exc:
            raise ValueError(str(exc)) from None
        self.space: Space = parse_space(plan.space, graph=graph, base_spec=self.base)
        self.name = plan.study or f"{Path(plan.graph).name.removesuffix('.graph.json')}-sweep"
        if "," in self.name or len(self.name) > 190:     # its runs are tagged study:NAME (spec.tags' rule)
            raise ValueError(f"--study: '{self.name[:60]}' must be at most 190 characters without a comma")
        self.store = RunStore(self.url)
        self.storage = open_storage(self.url)
        self.study = load_study(self.storage, self.name, metric=plan.metric, seed=plan.seed,
                                pruner=make_pruner(plan.prune, int(self.base["train"].get("epochs", 10))))
        self.slots: list[_Slot] = []
        self._stop = threading.Event()
        self._tmp = tempfile.TemporaryDirectory(prefix="torch-studio-sweep-")
        self._owner = owner_tag()
        self._peaks: dict[str, int] = {}
        self.gpus = gpu_slots(plan.device)

    def _base_spec(self) -> dict[str, Any]:
        p = self.plan
        spec: dict[str, Any] = json.loads(json.dumps(p.spec))
        data = p.data if p.data == "digits" else str(Path(p.data).expanduser().resolve())
        spec.setdefault("data", {})["dataset"] = data
        spec["device"] = p.device
        if p.epochs is not None:
            spec.setdefault("train", {})["epochs"] = p.epochs
        spec.setdefault("train", {})
        return spec

    # ------------------------------------------------------------------ the loop
    def stop(self) -> None:
        """Stop the sweep (any thread, a signal handler): its workers are stopped, its trials interrupted."""
        self._stop.set()

    def run(self) -> dict[str, Any]:
        """Run trials until the study has enough, or :meth:`stop`; the study's summary."""
        lost = recover_interrupted(self.study)
        if lost:
            self.log(f"trials {', '.join(map(str, lost))} were interrupted earlier; their parameters run again")
        try:
            while True:
                if self._stop.is_set():
                    self._stop_all()
                else:
                    while len(self.slots) < self.plan.parallel and counted(self.study) < self.plan.trials:
                        self._start_trial()
                        if self._stop.is_set():
                            break
                if not self.slots:
                    break
                if not self._poll_all():
                    time.sleep(POLL_S)
        finally:
            for slot in self.slots:       # only an exception of our own gets here with workers alive
                slot.worker.kill()
            self._tmp.cleanup()
            self.store.close()
        return summary(self.study)

    def _poll_all(self) -> bool:
        busy = False
        for slot in list(self.slots):
            events = slot.worker.poll()
            busy = busy or bool(events)
            for event in events:
                self._on_event(slot, event)
            if slot.worker.exit_code is not None:
                self.slots.remove(slot)
                self._conclude(slot, slot.worker.exit_code)
            elif slot.stop_sent_at is not None and time.monotonic() - slot.stop_sent_at > STOP_GRACE_S:
                slot.worker.kill()
        return busy

    def _stop_all(self) -> None:
        for slot in self.slots:
            if slot.stop_sent_at is None:
                slot.stop_sent_at = time.monotonic()
                slot.worker.stop()

    # ------------------------------------------------------------------ one trial
    def _start_trial(self) -> None:
        trial = self.study.ask()
        trial.set_user_attr("owner", self._owner)
        params = self.space.suggest(trial)
        spec, graph = self.space.apply(self.base, self.graph, params)
        spec["name"] = f"{self.name} trial {trial.number}"
        spec["tags"] = [*spec.get("tags", []), f"study:{self.name}", f"trial:{trial.number}"]   # made so by the worker
        spec.setdefault("model", {})["graph"] = graph
        shown = ", ".join(f"{k}={_fmt(v)}" for k, v in params.items())
        try:
            too_big = self._over_budget(spec, graph)
        except (MemoryPredictionError, SpecError) as exc:
            self._tell(trial, TrialState.FAIL, f"refused before a worker started: {exc}")
            return
        if too_big:
            self._tell(trial, TrialState.PRUNED, too_big)
            self.log(f"trial {trial.number} pruned before it started ({shown}): {too_big}")
            return
        gpu = free_gpu([s.gpu for s in self.slots], self.gpus)
        if gpu is not None:
            spec["device"] = f"cuda:{gpu}"      # one slot per GPU: the one fewest running trials use
            shown += f"; cuda:{gpu}"
        path = Path(self._tmp.name) / f"trial-{trial.number}.json"
        path.write_text(json.dumps(spec), encoding="utf-8")
        threads = os.environ.get(SWITCH) or str(max(1, usable_cores() // self.plan.parallel))
        worker = WorkerClient.run(path, db=self.url, env={**os.environ, SWITCH: threads}, die_with_parent=True)
        self.slots.append(_Slot(trial, params, worker, gpu=gpu))
        self.log(f"trial {trial.number} started ({shown})")

    def _over_budget(self, spec: dict[str, Any], graph: dict[str, Any]) -> str:
        """Why the trial cannot fit the budget ("" when it fits or there is no budget)."""
        budget = self.plan.budget_bytes
        if not budget:
            return ""
        checked = spec_from_dict(spec)
        key = json.dumps([graph["nodes"], graph.get("groups"), checked.train.batch_size, checked.optim.name,   # groups: repeats
                          checked.precision.dtype, checked.precision.channels_last, checked.memory.checkpoint],
                         sort_keys=True)
        if key not in self._peaks:
            g = graph_from_dict(graph)
            self._peaks[key] = predict_for_spec(g, checked).peak_bytes     # channels_last by the run's own rule
        peak = self._peaks[key]
        if peak <= budget:
            return ""
        return (f"predicted peak memory {mib(peak)} at batch {checked.train.batch_size} exceeds the "
                f"budget of {mib(budget)}; no worker was started")

    def _on_event(self, slot: _Slot, event: ev.Event) -> None:
        if isinstance(event, ev.RunStarted) and event.run_id is not None:
            slot.run_id = event.run_id
            slot.trial.set_user_attr("run_id", event.run_id)
        elif isinstance(event, ev.EpochEnd):
            self._on_epoch(slot, event)
        elif isinstance(event, ev.Finished):
            slot.finished = event
        elif isinstance(event, ev.Failed):
            slot.failure = f"{event.kind}: {event.message}"

    def _on_epoch(self, slot: _Slot, event: ev.EpochEnd) -> None:
        value = getattr(event, self.plan.metric)
        if value is None:
            slot.failure = f"the data has no validation split to measure {self.plan.metric} on"
            self._stop_one(slot)
            return
        better = max if self.plan.metric == "val_accuracy" else min
        slot.best = value if slot.best is None else better(slot.best, value)
        slot.trial.report(value, event.epoch)
        if self.plan.prune != "none" and slot.stop_sent_at is None and slot.trial.should_prune():
            slot.prune_reason = (f"pruned by the {self.plan.prune} rule after epoch {event.epoch} "
                                 f"({self.plan.metric} {value:.4f})")
            self._stop_one(slot)

    def _stop_one(self, slot: _Slot) -> None:
        if slot.stop_sent_at is None:
            slot.stop_sent_at = time.monotonic()
            slot.worker.stop()

    def _conclude(self, slot: _Slot, code: int) -> None:
        n, trial = slot.trial.number, slot.trial
        if slot.prune_reason:
            self._tell(trial, TrialState.PRUNED, slot.prune_reason)
            self._mark_pruned(slot)
            self.log(f"trial {n} {slot.prune_reason}")
        elif slot.failure:
            self._tell(trial, TrialState.FAIL, slot.failure)
            self.log(f"trial {n} failed: {slot.failure}")
        elif self._stop.is_set():
            mark_interrupted(self.study, trial, "interrupted: the sweep was stopped; its parameters are queued again")
            self.study.tell(trial, state=TrialState.FAIL)
            self.log(f"trial {n} stopped with the sweep")
        elif slot.finished is not None and slot.finished.status in ("completed", "early_stopped") \
                and slot.best is not None:
            self.study.tell(trial, slot.best)
            self.log(f"trial {n} complete: {self.plan.metric} {slot.best:.4f} (run {slot.run_id})")
        elif slot.finished is not None:
            self._tell(trial, TrialState.FAIL, f"the run ended {slot.finished.status} before it was measured")
        else:
            self._tell(trial, TrialState.FAIL, slot.worker.crash_reason(code))
            self.log(f"trial {n} failed: {slot.worker.crash_reason(code)}")

    def _mark_pruned(self, slot: _Slot) -> None:
        """The pruned trial's run says so in Runs, with the rule and the epoch (its worker, told to stop,
        recorded it "stopped" as it ended)."""
        if slot.run_id is None:
            return
        try:
            self.store.update_run(slot.run_id, status="pruned", error_kind="pruned", error=slot.prune_reason)
        except StoreError as exc:
            self.log(f"trial {slot.trial.number}: run {slot.run_id} could not be marked pruned ({exc})")

    def _tell(self, trial: optuna.Trial, state: TrialState, reason: str) -> None:
        trial.set_user_attr("reason", reason)
        self.study.tell(trial, state=state)


def _fmt(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)
