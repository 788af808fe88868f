"""Layers that change the spatial size of an image: Interpolate (nn.Upsample, F.interpolate), Pad (F.pad) and
Unfold (nn.Unfold, sliding windows as columns), Fold (nn.Fold, its inverse); and Roll (torch.roll), which moves pixels without resizing."""

from __future__ import annotations

import math

from ..catalog import Params, ParamSpec, Shape, fmt_shape, layer
from ..errors import ShapeError
from ._rules import conv_out, need_rank

CAT = "Resize"
MODES = ("nearest", "nearest-exact", "bilinear", "bicubic", "area")
PAD_MODES = ("constant", "reflect", "replicate", "circular")


@layer("Interpolate", CAT, "Resizes an image to a size or by a factor (nn.Upsample, F.interpolate): nearest, "
       "bilinear, bicubic or area.", [
           ParamSpec("size", "ints", None, "Output height and width (empty: scale by scale_factor).", minimum=1,
                     length=2, optional=True),
           ParamSpec("scale_factor", "float", 2.0, "Factor on height and width when no size is given.",
                     minimum=0.0, optional=True),
           ParamSpec("mode", "choice", "nearest", "How new pixels are computed.", choices=MODES),
           ParamSpec("align_corners", "bool", False, "Bilinear and bicubic: align the corner pixels of input and "
                     "output (ignored by the other modes)."),
           ParamSpec("antialias", "bool", False, "Bilinear and bicubic: low-pass filter while shrinking, as PIL "
                     "does (NaFlexViT resizing its position embedding)."),
       ], prefix="upsample", key_params=("size", "scale_factor", "mode"))
def interpolate(p: Params, xs: list[Shape]) -> Shape:
    (x,) = xs
    need_rank(x, 4, "CxHxW input")
    if p.get("antialias") and p["mode"] not in ("bilinear", "bicubic"):
        raise ShapeError(f"antialias needs mode bilinear or bicubic, not {p['mode']!r}", field="antialias")
    if p["size"] is not None:
        return (x[0], x[1], *p["size"])
    factor = p["scale_factor"]
    if factor is None or factor <= 0:
        raise ShapeError("needs a size or a positive scale_factor", field="scale_factor")
    out = [math.floor(d * factor) for d in x[2:]]
    if min(out) < 1:
        raise ShapeError(f"scale_factor {factor:g} makes {fmt_shape(x)} empty", field="scale_factor")
    return (x[0], x[1], *out)


@layer("Pad", CAT, "Pads the last dims (F.pad): pad lists (left, right) of the last dim first, then of the one "
       "before it; with a constant, or by reflecting, replicating or wrapping the edge. A negative amount crops "
       "(constant mode).", [
           ParamSpec("pad", "ints", [1, 1, 1, 1], "Padding (left, right) for the last dim, then (top, bottom)...; "
                     "negative crops that many (PNASNet's ZeroPad2d((-1, 1, -1, 1)): shift by one)."),
           ParamSpec("mode", "choice", "constant", "What the new elements hold.", choices=PAD_MODES),
           ParamSpec("value", "float", 0.0, "The constant (mode 'constant' only)."),
       ], prefix="pad", key_params=("pad", "mode"))
def pad(p: Params, xs: list[Shape]) -> Shape:
    (x,) = xs
    amounts = p["pad"]
    if len(amounts) % 2:
        raise ShapeError(f"pad needs pairs (left, right) per dim, got {len(amounts)} values", field="pad")
    dims = len(amounts) // 2
    if dims > len(x) - 1:
        raise ShapeError(f"pads {dims} dims, the input {fmt_shape(x)} has {len(x) - 1} after the batch", field="pad")
    if p["mode"] != "constant" and (dims > 3 or dims > len(x) - 2):
        raise ShapeError(f"{p['mode']} padding pads at most the last 3 dims and never the channels: "
                         f"{dims} dims of {fmt_shape(x)}", field="pad")
    if p["mode"] != "constant" and min(amounts) < 0:
        raise ShapeError(f"{p['mode']} padding cannot crop: pad {list(amounts)} has a negative amount", field="pad")
    out = list(x)
    for i in range(dims):
        d = len(x) - 1 - i
        left, right = amounts[2 * i], amounts[2 * i + 1]
        if x[d] + left + right < 1:
            raise ShapeError(f"pad {[left, right]} crops all of dim {d} (size {x[d]})", field="pad")
        if p["mode"] == "reflect" and max(left, right) >= x[d]:
            raise ShapeError(f"reflect padding {max(left, right)} must be smaller than the size {x[d]} of dim {d}",
                             field="pad")
        if p["mode"] == "circular" and max(left, right) > x[d]:
            raise ShapeError(f"circular padding {max(left, right)} must be at most the size {x[d]} of dim {d}",
                             field="pad")
        out[d] = x[d] + left + right
    return tuple(out)


def _windows(padding: str) -> list[ParamSpec]:
    """The sliding windows' fields of Unfold and Fold (nn.Unfold's and nn.Fold's own arguments)."""
    return [ParamSpec("kernel_size", "ints", [2, 2], "Window size.", minimum=1, length=2),
            ParamSpec("dilation", "ints", [1, 1], "Spacing of the window.", minimum=1, length=2),
            ParamSpec("padding", "ints", [0, 0], padding, minimum=0, length=2),
            ParamSpec("stride", "ints", [1, 1], "Step between windows.", minimum=1, length=2)]


@layer("Unfold", "Shape", "Cuts sliding windows out of an image (nn.Unfold, im2col): CxHxW becomes "
       "(C*kh*kw)xL, one column per window position.", [
           *_windows("Zero padding on each side."),
       ], prefix="unfold", key_params=("kernel_size", "stride"))
def unfold(p: Params, xs: list[Shape]) -> Shape:
    (x,) = xs
    need_rank(x, 4, "CxHxW input")
    out = [conv_out(x[2 + i], p["kernel_size"][i], p["stride"][i], p["padding"][i], p["dilation"][i])
           for i in range(2)]
    if min(out) < 1:
        raise ShapeError(f"window {fmt_shape((0, *p['kernel_size']))} is larger than the padded input "
                         f"{fmt_shape(x[1:], batch=True)}")
    return (x[0], x[1] * p["kernel_size"][0] * p["kernel_size"][1], out[0] * out[1])


@layer("Fold", "Shape", "Sums sliding windows back into an image (nn.Fold, col2im; the inverse of Unfold): "
       "(C*kh*kw)xL becomes CxHxW, overlapping values added (VOLO's outlook attention).", [
           ParamSpec("output_size", "ints", [4, 4], "The image's height and width.", minimum=1, length=2),
           *_windows("Zero padding on each side, cut off."),
       ], prefix="fold", key_params=("output_size", "kernel_size"))
def fold(p: Params, xs: list[Shape]) -> Shape:
    (x,) = xs
    need_rank(x, 3, "(C*kh*kw)xL input")
    window = p["kernel_size"][0] * p["kernel_size"][1]
    if x[1] % window:
        raise ShapeError(f"{x[1]} rows are not whole windows of {window} values (kernel_size "
                         f"{p['kernel_size'][0]}x{p['kernel_size'][1]})", field="kernel_size")
    h, w = p["output_size"]
    out = [conv_out(size, p["kernel_size"][i], p["stride"][i], p["padding"][i], p["dilation"][i])
           for i, size in enumerate((h, w))]
    if min(out) < 1 or out[0] * out[1] != x[2]:
        raise ShapeError(f"{x[2]} columns, but a {h}x{w} image has {max(out[0], 0) * max(out[1], 0)} window "
                         "positions", field="output_size")
    return (x[0], x[1] // window, h, w)


@layer("Roll", CAT, "Shifts each sample cyclically along its dims (torch.roll): what leaves one end comes back "
       "at the other (Swin's shifted windows).", [
           ParamSpec("shifts", "ints", [1], "How far each dim shifts (negative: towards the start)."),
           ParamSpec("dims", "ints", [1], "The dims that shift, one per shift (batch is 0 and does not shift)."),
       ], prefix="roll", key_params=("shifts", "dims"))
def roll(p: Params, xs: list[Shape]) -> Shape:
    (x,) = xs
    shifts, dims = p["shifts"], p["dims"]
    if not dims or len(shifts) != len(dims):
        raise ShapeError(f"needs one shift per dim, got {len(shifts)} shift(s) for {len(dims)} dim(s)", field="dims")
    for d in dims:
        if not -len(x) <= d < len(x) or d % len(x) == 0:
            raise ShapeError(f"cannot roll dim {d} of {fmt_shape(x, batch=True)}: it is the batch or out of range",
                             field="dims")
    return x


@layer("Tile", CAT, "Repeats each sample along its trailing dims (Tensor.tile): reps [2, 3] makes an h x w map "
       "2h x 3w, the whole map again and again (SAM2 Hiera's window position embedding).", [
           ParamSpec("reps", "ints", [2, 2], "How many times each trailing dim repeats, aligned to the last dims "
                     "(the batch never repeats).", minimum=1),
       ], prefix="tile", key_params=("reps",))
def tile(p: Params, xs: list[Shape]) -> Shape:
    (x,) = xs
    reps = p["reps"]
    if not reps or len(reps) > len(x) - 1:
        raise ShapeError(f"reps {list(reps)} must name 1 to {len(x) - 1} trailing dims of {fmt_shape(x, batch=True)}",
                         field="reps")
    lead = len(x) - len(reps)
    return (*x[:lead], *(d * r for d, r in zip(x[lead:], reps, strict=True)))
