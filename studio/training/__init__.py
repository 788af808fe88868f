"""Training as a studio feature: the Run menu, the toolbar's Train, the Train and Runs workspaces.

``install(port, db_url=...)`` plugs it into the window (:mod:`.hook`); the training side itself (run
store, dashboard, runs dock: :mod:`.controller`, seconds of imports) is built on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .hook import TrainingHook

if TYPE_CHECKING:
    from ..port import StudioPort

__all__ = ["TrainingHook", "install"]


def install(port: StudioPort, db_url: str | None = None) -> TrainingHook:
    """Add the Run menu, the one Train action and the Train and Runs workspaces through ``port``."""
    return TrainingHook(port, db_url=db_url)
