"""The Experiments workspace: the sweeps (Optuna studies) in the run store, live while they run.

``install(port, db_url=..., training=..., export_run=...)`` registers the workspace (:mod:`.hook`); its
view (:mod:`.panel`, pyqtgraph, Optuna) is built on the first switch to it; New Sweep is
:mod:`.new_sweep`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .hook import ExperimentsHook, retrain_spec

if TYPE_CHECKING:
    from ..port import StudioPort

__all__ = ["ExperimentsHook", "install", "retrain_spec"]


def install(port: StudioPort, db_url: str | None = None, *, training: Callable[[], Any] | None = None,
            export_run: Callable[[int], Any] | None = None,
            dataset: Callable[[], str | None] | None = None) -> ExperimentsHook:
    """Register the Experiments workspace through ``port``; ``training()`` gives the training controller
    (built on demand), ``export_run(run_id)`` opens the export of a run, ``dataset()`` the last run's
    dataset (None: none yet), which New Sweep starts from."""
    return ExperimentsHook(port, db_url, training=training, export_run=export_run, dataset=dataset)
