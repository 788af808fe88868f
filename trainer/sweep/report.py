"""What the Experiments workspace shows of the studies in a run store's database, read-only and Qt-free:
the studies there, and one study as plain data (its trials, best, parameter importances, the ranges
of its parameters for parallel coordinates). Reading never creates Optuna's tables."""

from __future__ import annotations

import math
from typing import Any

import optuna
from optuna.trial import TrialState
from sqlalchemy import inspect

from .study import SQLITE_TIMEOUT_S, summary


def storage_for_reading(url: str) -> optuna.storages.RDBStorage | None:
    """Optuna's storage in the run store at ``url``; None when no study was ever made there (or no
    store: a new user's SQLite file does not exist before the first run or sweep)."""
    from ..store.engine import StoreMissing, make_engine

    try:
        engine, _ = make_engine(url, create=False)
    except StoreMissing:
        return None
    try:
        if not inspect(engine).has_table("studies"):
            return None
    finally:
        engine.dispose()
    kwargs: dict[str, Any] = {"connect_args": {"timeout": SQLITE_TIMEOUT_S}} if url.startswith("sqlite") else {}
    return optuna.storages.RDBStorage(url, engine_kwargs=kwargs, skip_table_creation=True)


def list_studies(storage: optuna.storages.BaseStorage | None) -> list[dict[str, Any]]:
    """Each study: ``name``, ``trials`` (how many), ``running`` (how many now), newest first."""
    if storage is None:
        return []
    out = []
    for s in storage.get_all_studies():
        trials = storage.get_all_trials(s._study_id, deepcopy=False)
        out.append({"name": s.study_name, "trials": len(trials), "id": s._study_id,
                    "running": sum(1 for t in trials if t.state == TrialState.RUNNING)})
    return sorted(out, key=lambda s: -s["id"])


def study_report(storage: optuna.storages.BaseStorage, name: str) -> dict[str, Any]:
    """:func:`trainer.sweep.study.summary` plus ``importances`` (parameter -> share, Optuna's PED-ANOVA
    (no scikit-learn, unlike its fANOVA) over the complete trials; empty with fewer than two, or one parameter that never varied),
    ``ranges`` (parameter -> [low, high] for numbers, or its choices) and ``running``."""
    study = optuna.load_study(study_name=name, storage=storage)
    out = summary(study)
    out["running"] = sum(1 for t in out["trials"] if t["state"] == "running")
    out["importances"] = importances(study)
    out["ranges"] = ranges(study)
    return out


def importances(study: optuna.Study) -> dict[str, float]:
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if len(complete) < 2:
        return {}
    try:
        found = optuna.importance.get_param_importances(study, evaluator=optuna.importance.PedAnovaImportanceEvaluator())
    except (RuntimeError, ValueError, ZeroDivisionError):   # too few distinct values to split on
        return {}
    return {k: float(v) for k, v in found.items() if math.isfinite(v)}


def ranges(study: optuna.Study) -> dict[str, list[Any]]:
    """Each parameter's axis: [low, high, "log"|"linear"] for numbers, or ["choice", *choices]."""
    out: dict[str, list[Any]] = {}
    for t in study.get_trials(deepcopy=False):
        for name, dist in t.distributions.items():
            if name in out:
                continue
            if isinstance(dist, optuna.distributions.CategoricalDistribution):
                out[name] = ["choice", *dist.choices]
            else:
                low, high = dist.low, dist.high   # type: ignore[attr-defined]
                out[name] = [low, high, "log" if getattr(dist, "log", False) else "linear"]
    return out
