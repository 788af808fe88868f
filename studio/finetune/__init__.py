"""Fine-tuning on the design as a studio feature: Freeze / Unfreeze the selected blocks, a learning-rate
multiplier per block, Replace Head, as Graph menu commands (:mod:`.hook`; also on the canvas's right-click
menu, :mod:`graph_editor.ui.menus`). ``install(port)`` plugs it into the window.

What they set is drawn on the canvas (:mod:`graph_editor.ui.marks`), kept in the graph file and written
into the run spec the Train dialog sends (``model.frozen``, ``model.lr_scale``, ``model.reinit``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .hook import FinetuneHook

if TYPE_CHECKING:
    from ..port import StudioPort

__all__ = ["FinetuneHook", "install"]


def install(port: StudioPort) -> FinetuneHook:
    """Add Graph > Freeze / Unfreeze Selection, Learning-Rate Multiplier and Replace Head through ``port``."""
    return FinetuneHook(port)
