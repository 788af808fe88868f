"""Sweeps: Optuna studies over a run's recipe and its graph's own numbers (issue 24).

:mod:`.space` parses a search space, :mod:`.study` keeps the study in the run store's database and
reads it back as plain data, :mod:`.runner` runs trials as worker processes. The runner (and the
memory prediction it imports) loads on first use of :class:`Sweep`: the Experiments workspace reads
studies (:mod:`.report`) without it, and its first entry froze the window for it (0.7 s of imports).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .space import Dimension, Space, SpaceError, parse_space
from .study import PRUNERS, TrialRecord, summary

if TYPE_CHECKING:
    from .runner import Sweep, SweepPlan

__all__ = ["Sweep", "SweepPlan", "Dimension", "Space", "SpaceError", "parse_space", "PRUNERS", "TrialRecord",
           "summary"]


def __getattr__(name: str) -> Any:
    if name in ("Sweep", "SweepPlan"):
        from . import runner

        return getattr(runner, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
