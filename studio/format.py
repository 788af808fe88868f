"""Shapes as the summary and the status bar write and read them (no torch needed); counts and bytes are
:mod:`graph_editor.model.units`."""

from __future__ import annotations

from collections.abc import Sequence


def shape(dims: Sequence[int]) -> str:
    """Per-sample shape without the batch dimension: (8, 16, 5, 5) -> '16x5x5'."""
    rest = dims[1:]
    return "x".join(str(d) for d in rest) if rest else "scalar"


def parse_shape(text: str) -> tuple[int, ...]:
    """'3, 32, 32' or '3x32x32' -> (3, 32, 32); ValueError naming the problem otherwise."""
    parts = [p.strip() for p in text.replace("x", ",").split(",") if p.strip()]
    if not parts:
        raise ValueError("enter a shape such as 3, 32, 32")
    try:
        dims = tuple(int(p) for p in parts)
    except ValueError:
        raise ValueError(f"'{text}' is not a list of whole numbers such as 3, 32, 32") from None
    if any(d < 1 for d in dims):
        raise ValueError(f"every size must be at least 1, got {text!r}")
    return dims
