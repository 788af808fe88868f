"""Sweeps: Optuna studies over a run's recipe and its graph's own numbers (issue 24).

:mod:`.space` parses a search space, :mod:`.study` keeps the study in the run store's database and
reads it back as plain data, :mod:`.runner` runs trials as worker processes.
"""

from __future__ import annotations

from .runner import Sweep, SweepPlan
from .space import Dimension, Space, SpaceError, parse_space
from .study import PRUNERS, TrialRecord, summary

__all__ = ["Sweep", "SweepPlan", "Dimension", "Space", "SpaceError", "parse_space", "PRUNERS", "TrialRecord",
           "summary"]
