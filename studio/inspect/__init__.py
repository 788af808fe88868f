"""The Inspect workspace: the backward graph of the design, a heat overlay on the canvas, live
gradient figures from a run. ``install(port, training, current_run)`` registers it with the window's
workspaces (:mod:`.hook`); the views (:mod:`.workspace`, :mod:`.backward`, :mod:`.flow`, :mod:`.heat`)
load on the first switch to it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .hook import InspectHook

if TYPE_CHECKING:
    from ..port import StudioPort

__all__ = ["InspectHook", "install"]


def install(port: StudioPort, training: Callable[[], Any] | None = None,
            current_run: Callable[[], int | None] | None = None) -> InspectHook:
    """Register the Inspect workspace (canvas + Backward graph + Gradient flow docks) through ``port``;
    ``training()`` gives the training controller once built, ``current_run()`` the run started last."""
    return InspectHook(port, training, current_run)
