"""RelativePositionBias: the learned bias each attention head adds for the offset between two positions of a
window (Swin, BEiT: signed offsets; LeViT, EfficientFormer: absolute offsets), gathered from a table."""

from __future__ import annotations

from ..catalog import INT_LIMIT, Params, ParamSpec, Shape, layer
from ..errors import ShapeError

KINDS = ("relative", "absolute")


def table_rows(kind: str, window: list[int]) -> int:
    """Rows of the table: one per signed offset ((2h-1)(2w-1)) or per absolute offset (h*w)."""
    h, w = window
    return (2 * h - 1) * (2 * w - 1) if kind == "relative" else h * w


@layer("RelativePositionBias", "Transformer", "A learned bias per head for each pair of positions in an h x w "
       "window, gathered from a table by their offset: [1, heads, h*w, h*w], added to the attention scores.", [
           ParamSpec("num_heads", "int", 4, "Attention heads (one bias each).", minimum=1),
           ParamSpec("window", "ints", [7, 7], "Window height and width in positions.", minimum=1, length=2),
           ParamSpec("kind", "choice", "relative", "Signed offsets (Swin: a (2h-1)(2w-1) table) or absolute "
                     "offsets (LeViT: an h*w table).", choices=KINDS),
       ], inputs=(), prefix="rel_pos", display="Relative Position Bias", key_params=("num_heads", "window", "kind"))
def relative_position_bias(p: Params, xs: list[Shape]) -> Shape:
    if xs:
        raise ShapeError("takes no input")
    n = p["window"][0] * p["window"][1]
    if n * n * p["num_heads"] > INT_LIMIT:
        raise ShapeError(f"a {n}x{n} bias per head is beyond any device", field="window")
    return (1, p["num_heads"], n, n)
