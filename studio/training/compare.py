"""Comparing runs as TensorBoard and W&B users expect, in pure NumPy and plain data (no Qt), tested alone.

- :func:`ema`: TensorBoard's smoothing, an exponential moving average debiased at the start (the first
  points are not pulled towards 0), NaN gaps kept; the raw curve is drawn faint beside it.
- :func:`x_values`: a curve's steps as epochs or as wall-clock seconds, read off the run's own
  ``epoch`` and ``time`` series (which the worker records with every metrics window) by interpolation.
- :func:`recipe_diff`: two run specs' fields that differ, as dotted paths (the graph diff lives apart).
- :func:`parse_filter` / :func:`matches`: the Runs filter: words match any column, ``tag:NAME`` a
  tag, ``FIELD=VALUE`` (``FIELD!=VALUE``, ``FIELD>VALUE``, ``FIELD<VALUE``) any recipe field by its dotted
  path (``optim.name=sgd``, ``train.batch_size>=64``) or a short name (``lr``, ``batch_size``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from trainer.metrics import names

X_AXES = ("step", "epoch", "wall time")
SHORT = {"lr": "optim.lr", "optimizer": "optim.name", "weight_decay": "optim.weight_decay",
         "batch_size": "train.batch_size", "epochs": "train.epochs", "precision": "precision.dtype",
         "compile": "precision.compile", "dataset": "data.dataset", "schedule": "schedule.name"}
CONDITION = re.compile(r"([A-Za-z_][\w.]*)\s*(!=|>=|<=|=|>|<)\s*(.+)")


def ema(values: np.ndarray, weight: float) -> np.ndarray:
    """TensorBoard's debiased exponential moving average (``weight`` 0 = raw, 0.99 = very smooth);
    a NaN stays NaN and does not poison what follows."""
    if not 0.0 <= weight < 1.0:
        raise ValueError(f"smoothing must be in [0, 1), got {weight}")
    out = np.empty(len(values), dtype=np.float64)
    last, count = 0.0, 0
    for i, v in enumerate(np.asarray(values, dtype=np.float64)):
        if not math.isfinite(v):
            out[i] = v
            continue
        last = last * weight + (1.0 - weight) * v
        count += 1
        out[i] = last / (1.0 - weight ** count) if weight else v
    return out


def x_values(steps: np.ndarray, axis: str, reference: dict[str, tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """``steps`` on the ``axis`` the user chose: "step" as they are; "epoch" and "wall time" from the
    run's ``epoch`` and ``time`` series (``reference[name] = (steps, values)``), interpolated (a run
    recorded before those series existed gets NaN: nothing plotted rather than a wrong axis)."""
    if axis == "step":
        return np.asarray(steps, dtype=np.float64)
    name = {"epoch": names.EPOCH.name, "wall time": names.TIME.name}.get(axis)
    if name is None:
        raise ValueError(f"unknown x axis {axis!r} (choose {', '.join(X_AXES)})")
    ref_steps, ref_values = reference.get(name, (np.zeros(0), np.zeros(0)))
    if len(ref_steps) == 0:
        return np.full(len(steps), np.nan)
    if name == names.EPOCH.name:    # an epoch's fraction: steps per epoch from where the epoch number changes
        per_epoch = max(float(ref_steps[-1]) / max(float(ref_values[-1]), 1.0), 1.0)
        return np.asarray(steps, dtype=np.float64) / per_epoch
    return np.interp(np.asarray(steps, dtype=np.float64), ref_steps, ref_values)


def flatten(spec: Any, prefix: str = "") -> dict[str, Any]:
    """A nested spec as ``{"optim.lr": 0.003, ...}`` (lists kept whole; the graph object left out)."""
    out: dict[str, Any] = {}
    if not isinstance(spec, dict):
        return out
    for key, value in spec.items():
        path = f"{prefix}{key}"
        if path == "model.graph" and isinstance(value, dict):
            continue                    # a graph snapshot: the graph diff shows it
        if isinstance(value, dict):
            out.update(flatten(value, f"{path}."))
        else:
            out[path] = value
    return out


def recipe_diff(a: dict[str, Any], b: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """The fields where two specs differ, sorted: ``(path, value in a, value in b)``; a field one of
    them lacks shows as None there."""
    fa, fb = flatten(a), flatten(b)
    return [(k, fa.get(k), fb.get(k)) for k in sorted(fa.keys() | fb.keys()) if fa.get(k) != fb.get(k)]


def shown_pair(x: Any, y: Any) -> tuple[str, str]:
    """Two differing recipe values as the diff shows them: numbers to the fewest significant digits (4 at
    least) that still tell them apart (``0.0004835 -> 0.006527``, where a sweep's draws read
    ``0.0004834927115858603 -> 0.006526684574033755``); anything else as JSON."""
    if all(isinstance(v, float | int) and not isinstance(v, bool) for v in (x, y)) and x != y:
        for digits in range(4, 18):
            a, b = f"{x:.{digits}g}", f"{y:.{digits}g}"
            if a != b:
                return a, b
    return json.dumps(x), json.dumps(y)


@dataclass(frozen=True)
class Condition:
    field: str
    op: str
    value: str


@dataclass(frozen=True)
class RunFilter:
    words: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    conditions: tuple[Condition, ...] = ()


def parse_filter(text: str) -> RunFilter:
    """Split the filter box's text into words, ``tag:`` terms and field conditions (space-separated)."""
    words, tags, conditions = [], [], []
    for token in text.split():
        if token.lower().startswith("tag:") and len(token) > 4:
            tags.append(token[4:].lower())
        elif (m := CONDITION.fullmatch(token)) is not None:
            conditions.append(Condition(SHORT.get(m.group(1), m.group(1)), m.group(2), m.group(3)))
        else:
            words.append(token.lower())
    return RunFilter(tuple(words), tuple(tags), tuple(conditions))


def matches(flt: RunFilter, text: str, tags: Iterable[str], spec: dict[str, Any]) -> bool:
    """Whether a run passes: every word in ``text`` (its columns), every tag among its tags (a tag
    term matches a whole tag, or its name before a ``:``), every condition on its flattened spec."""
    low = text.lower()
    if any(w not in low for w in flt.words):
        return False
    own = [t.lower() for t in tags]
    if any(not any(t == q or t.split(":", 1)[0] == q or t == q.rstrip(":") for t in own) for q in flt.tags):
        return False
    fields = flatten(spec) if flt.conditions else {}
    return all(_holds(fields.get(c.field), c) for c in flt.conditions)


def _holds(value: Any, c: Condition) -> bool:
    if value is None:
        return c.op == "!="
    try:
        left, right = float(value), float(c.value)
        numeric = not isinstance(value, bool)
    except (TypeError, ValueError):
        numeric = False
    if not numeric:
        text = str(value).lower()
        return {"=": text == c.value.lower(), "!=": text != c.value.lower()}.get(c.op, False)
    return {"=": math.isclose(left, right, rel_tol=1e-9), "!=": not math.isclose(left, right, rel_tol=1e-9),
            ">": left > right, "<": left < right, ">=": left >= right, "<=": left <= right}[c.op]
