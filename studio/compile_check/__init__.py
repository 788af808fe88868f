"""Graph > Check Compile as a studio feature: where ``torch.compile`` breaks the graph's model, as
warnings on its nodes (:mod:`.check`). ``install(port)`` plugs it into the window."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .check import CompileCheck

if TYPE_CHECKING:
    from ..port import StudioPort

__all__ = ["CompileCheck", "install"]


def install(port: StudioPort) -> CompileCheck:
    """Add Graph > Check Compile (Shift+F7) through ``port``."""
    return CompileCheck(port)
