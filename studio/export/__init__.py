"""Export as a studio feature: the Export menu and the toolbar's one-click ONNX (:mod:`.hook`), the
dialog that shows an export's progress and proof (:mod:`.dialog`) and the export job it runs off the GUI
thread (:mod:`.job`). ``install(port, db_url=..., current_run=...)`` plugs it into the window."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .hook import ExportHook

if TYPE_CHECKING:
    from ..port import StudioPort

__all__ = ["ExportHook", "install"]


def install(port: StudioPort, db_url: str | None = None,
            current_run: Callable[[], int | None] | None = None) -> ExportHook:
    """Add the Export menu and the one-click export through ``port``; ``current_run()`` gives the run
    this window started last (a one-click export exports its graph's newest completed run)."""
    return ExportHook(port, db_url=db_url, current_run=current_run)
