"""A sweep's Optuna study, kept in the run store's own database, and what a study holds, as plain data.

Optuna's RDB storage writes its tables (``studies``, ``trials``...) beside the run store's (``runs``,
``metrics``...) in the same database: a SQLite file by default, PostgreSQL when a team shares one.
Two sweeps on one study, in two processes or on two machines, share it through that storage.

Each trial keeps, as user attributes: ``run_id`` (its worker run; absent when none started),
``reason`` (why it was pruned or failed), ``owner`` (``host:pid:start`` of the sweep running it) and
``interrupted`` (its sweep stopped or died under it: the trial is failed and its parameters queued
again, so a resumed sweep runs it once more and does not count it).
"""

from __future__ import annotations

import os
import re
import socket
import time
from dataclasses import asdict, dataclass
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState
from sqlalchemy.exc import SQLAlchemyError

from ..store.liveness import process_alive, process_started
from ..store.runs import RunStore, StoreError

PRUNERS = ("median", "halving", "hyperband", "none")
METRICS = {"val_accuracy": "maximize", "val_loss": "minimize"}
STATES = {TrialState.COMPLETE: "complete", TrialState.PRUNED: "pruned", TrialState.FAIL: "failed",
          TrialState.RUNNING: "running", TrialState.WAITING: "waiting"}
SQLITE_TIMEOUT_S = 60   # Optuna's writes wait this long for another process's SQLite lock


def open_storage(url: str, attempts: int = 5) -> optuna.storages.RDBStorage:
    """Optuna's storage in the run store's database (made, with the run store's tables, if new).

    Two sweeps starting at once on a new database both create tables; the one that loses that race
    gets "already exists" and tries again, finding them made."""
    kwargs: dict[str, Any] = {"pool_pre_ping": True}
    if url.startswith("sqlite"):
        kwargs["connect_args"] = {"timeout": SQLITE_TIMEOUT_S}
    for attempt in range(attempts):
        try:
            RunStore(url).close()      # the run store's tables, its WAL mode and its folder first
            return optuna.storages.RDBStorage(url, engine_kwargs=kwargs)
        except (StoreError, SQLAlchemyError) as exc:
            if attempt == attempts - 1 or "already exists" not in str(exc).lower() and "duplicate" not in \
                    str(exc).lower() and "unique" not in str(exc).lower():
                raise
            time.sleep(0.2 * (attempt + 1))
    raise AssertionError("unreachable")


def make_pruner(name: str, epochs: int) -> optuna.pruners.BasePruner:
    """Optuna's pruner for ``name``. Median: prune a trial whose epoch falls below the median of the
    trials before it at that epoch, from the second finished trial on (a sweep of a few trials has
    no five to wait for); halving and Hyperband: rungs from one epoch up to ``epochs``."""
    if name == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=0)
    if name == "halving":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=3)
    if name == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=1, max_resource=max(epochs, 1), reduction_factor=3)
    if name == "none":
        return optuna.pruners.NopPruner()
    raise ValueError(f"--prune: unknown pruner '{name}' (choose {', '.join(PRUNERS)})")


def load_study(storage: optuna.storages.BaseStorage, name: str, *, metric: str, pruner: optuna.pruners.BasePruner,
               seed: int | None = None) -> optuna.Study:
    """Create or join the study ``name``; a study made for the other direction is refused."""
    direction = METRICS[metric]
    study = optuna.create_study(storage=storage, study_name=name, direction=optuna.study.StudyDirection[direction.upper()],
                                pruner=pruner,
                                sampler=optuna.samplers.TPESampler(seed=seed), load_if_exists=True)
    if study.direction.name.lower() != direction:
        raise ValueError(f"study '{name}' {study.direction.name.lower()}s its objective; {metric} is to "
                         f"{direction} (name another study)")
    stored = study.user_attrs.get("metric")
    if stored is None:
        study.set_user_attr("metric", metric)
    elif stored != metric:
        raise ValueError(f"study '{name}' optimises {stored}, not {metric} (name another study)")
    return study


def owner_tag() -> str:
    """This process as a trial's owner: host, pid and the pid's start time (pids are reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{process_started(os.getpid())}"


def owner_alive(tag: str) -> bool:
    """Whether the sweep that owns a trial still runs. Another host's sweep is taken to be alive."""
    host, _, rest = tag.partition(":")
    pid, _, started = rest.partition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True
    return process_alive(int(pid), int(started) if started.isdigit() else 0)


def recover_interrupted(study: optuna.Study) -> list[int]:
    """Fail the running trials whose sweep died (their worker got SIGTERM with it), mark them
    interrupted and queue their parameters again; returns their numbers."""
    storage, lost = study._storage, []
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        owner = t.user_attrs.get("owner")
        if owner is None or owner_alive(owner):
            continue
        mark_interrupted(study, t, "interrupted: the sweep running it stopped; its parameters are queued again")
        storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
        lost.append(t.number)
    return lost


def mark_interrupted(study: optuna.Study, trial: FrozenTrial | Any, reason: str) -> None:
    """Record ``reason`` and the interrupted flag on ``trial`` and queue its parameters again."""
    storage = study._storage
    storage.set_trial_user_attr(trial._trial_id, "interrupted", True)
    storage.set_trial_user_attr(trial._trial_id, "reason", reason)
    study.enqueue_trial(dict(storage.get_trial(trial._trial_id).params), user_attrs={"retry_of": trial.number})


def counted(study: optuna.Study) -> int:
    """Trials that count towards ``--trials``: finished ones (not interrupted) and running ones."""
    trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL,
                                                      TrialState.RUNNING))
    return sum(1 for t in trials if not t.user_attrs.get("interrupted"))


BRIEF = ((re.compile(r"^predicted peak memory ([\d.]+ \w+) at batch \d+ exceeds the budget of [\d.]+ \w+.*"), r"over budget: \1"),
         (re.compile(r"^pruned by the (\S+) rule after epoch (\d+).*"), r"\1 rule, epoch \2"),
         (re.compile(r"^interrupted: .*"), "interrupted"))


def brief_reason(reason: str) -> str:
    """A trial's reason in a few words for a table cell (the runner's own messages; others as they are):
    "over budget: 370.3 MiB" (its prediction), "median rule, epoch 1", "interrupted"."""
    for pattern, short in BRIEF:
        if pattern.match(reason):
            return pattern.sub(short, reason, count=1)
    return reason


@dataclass
class TrialRecord:
    """One trial as the CLI's ``--json`` and the Experiments workspace show it."""

    number: int
    state: str                 # complete, pruned, failed (running, waiting: another sweep's, now)
    params: dict[str, Any]
    value: float | None
    run_id: int | None         # None: no worker started (pruned by the memory budget, refused)
    reason: str
    intermediate: dict[int, float]
    interrupted: bool = False

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["intermediate"] = {str(k): v for k, v in self.intermediate.items()}
        return out


def trial_record(t: FrozenTrial) -> TrialRecord:
    return TrialRecord(number=t.number, state=STATES.get(t.state, t.state.name.lower()), params=dict(t.params),
                       value=t.value if t.state == TrialState.COMPLETE else None,
                       run_id=t.user_attrs.get("run_id"), reason=t.user_attrs.get("reason", ""),
                       intermediate=dict(t.intermediate_values), interrupted=bool(t.user_attrs.get("interrupted")))


def summary(study: optuna.Study) -> dict[str, Any]:
    """The study as one JSON-able object: ``study``, ``metric``, ``direction``, ``trials``, ``best``."""
    records = [trial_record(t) for t in study.get_trials(deepcopy=False)]
    maximize = study.direction == optuna.study.StudyDirection.MAXIMIZE
    done = [(r.value if maximize else -r.value, r) for r in records if r.state == "complete" and r.value is not None]
    best = max(done, key=lambda pair: pair[0])[1] if done else None
    return {"study": study.study_name, "metric": study.user_attrs.get("metric", "val_accuracy"),
            "direction": "maximize" if maximize else "minimize",
            "trials": [r.to_dict() for r in records],
            "best": None if best is None else {"number": best.number, "params": best.params, "value": best.value,
                                               "run_id": best.run_id}}
