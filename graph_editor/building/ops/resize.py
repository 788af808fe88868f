"""Interpolate (``nn.Upsample``, ``F.interpolate``), Pad (``F.pad``, the ``nn.*Pad2d`` modules), Unfold, Fold and Roll
(``torch.roll``): no FLOPs that ``FlopCounterMode`` counts."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import fx, nn

from ...analysis.per_node import zero_flops
from ...importer.rules import Mapped, Unmappable, const, function_rule, module_rule, pair, static_ints, tensor
from ..modules import Call, Example, Params, Shape, builder

zero_flops("Interpolate", "Pad")
_CORNERS = ("bilinear", "bicubic")  # the modes that take align_corners


# ------------------------------------------------------------------ Interpolate
@builder("Interpolate", example=Example((2, 3, 5), {"scale_factor": 1.5, "mode": "bilinear",
                                                    "align_corners": True}))
def _interpolate(p: Params, xs: list[Shape]) -> Call:
    size = tuple(p["size"]) if p["size"] is not None else None
    kwargs = {"size": size, "scale_factor": None if size else float(p["scale_factor"]), "mode": p["mode"],
              "align_corners": bool(p["align_corners"]) if p["mode"] in _CORNERS else None}
    return Call(AntialiasedResize, (), kwargs) if p["antialias"] else Call(nn.Upsample, (), kwargs)


class AntialiasedResize(nn.Module):
    """``F.interpolate(x, ..., antialias=True)``: bilinear or bicubic with a low-pass filter when shrinking (which
    nn.Upsample cannot ask for)."""

    def __init__(self, size: tuple[int, int] | None = None, scale_factor: float | None = None, mode: str = "bilinear",
                 align_corners: bool | None = None) -> None:
        super().__init__()
        self.size, self.scale_factor, self.mode, self.align_corners = size, scale_factor, mode, align_corners

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners,
                                               antialias=True)

    def extra_repr(self) -> str:
        return f"size={self.size}, scale_factor={self.scale_factor}, mode={self.mode!r}"


@module_rule(AntialiasedResize)
def _import_antialiased(m: AntialiasedResize, xs: list[fx.Node]) -> Mapped:
    return _interpolate_params(xs[0], m.size, m.scale_factor, m.mode, m.align_corners, None, True)


def _interpolate_params(x: fx.Node, size: Any, scale_factor: Any, mode: str, align_corners: Any,
                        recompute_scale_factor: Any = None, antialias: bool = False) -> Mapped:
    if antialias and mode not in _CORNERS:
        raise Unmappable(f"interpolate with antialias=True in mode {mode!r}")
    if mode not in ("nearest", "nearest-exact", "bilinear", "bicubic", "area"):
        raise Unmappable(f"interpolate mode {mode!r} (of a 1-D or 3-D input; the layer resizes images)")
    value = x.meta.get("val")
    if isinstance(value, torch.Tensor) and value.dim() != 4:
        raise Unmappable(f"interpolate of a {value.dim()}-D tensor; the layer resizes BxCxHxW images")
    params: dict[str, Any] = {"mode": mode, "align_corners": bool(align_corners) if mode in _CORNERS else False,
                              "antialias": bool(antialias)}
    factor = const(scale_factor, "scale_factor")
    if size is not None or recompute_scale_factor:  # a recomputed factor is the size it lands on
        size = static_ints(size, "size") if size is not None else None
        params.update(size=pair(size) if size is not None else _scaled(value, factor), scale_factor=None)
        return Mapped("Interpolate", params, [x])
    factors = {float(f) for f in (factor if isinstance(factor, list | tuple) else [factor])}
    if len(factors) != 1:
        raise Unmappable(f"interpolate by different factors per dim ({factor!r}); the layer scales both alike")
    return Mapped("Interpolate", {**params, "scale_factor": factors.pop()}, [x])


def _scaled(value: Any, factor: Any) -> list[int]:
    if not isinstance(value, torch.Tensor):
        raise Unmappable("recompute_scale_factor without a known input size")
    factors = factor if isinstance(factor, list | tuple) else [factor, factor]
    return [int(d * f) for d, f in zip(value.shape[2:], factors, strict=True)]


@module_rule(nn.Upsample)
def _import_upsample(m: nn.Upsample, xs: list[fx.Node]) -> Mapped:
    return _interpolate_params(xs[0], m.size, m.scale_factor, m.mode, m.align_corners, m.recompute_scale_factor)


@function_rule(F.interpolate, F.upsample)
def _f_interpolate(input: Any, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
                   align_corners: Any = None, recompute_scale_factor: Any = None, antialias: bool = False) -> Mapped:
    return _interpolate_params(tensor(input), size, scale_factor, const(mode, "mode"), align_corners,
                               recompute_scale_factor, antialias)


# ------------------------------------------------------------------ Pad
class Pad(nn.Module):
    """``F.pad(x, pad, mode, value)``: pairs (left, right) for the last dim first."""

    def __init__(self, pad: list[int], mode: str = "constant", value: float = 0.0) -> None:
        super().__init__()
        self.pad, self.mode, self.value = tuple(pad), mode, value

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.mode == "constant":  # spelled out: model.py copies this class and imports only torch
            return torch.nn.functional.pad(x, self.pad, value=self.value)
        return torch.nn.functional.pad(x, self.pad, mode=self.mode)

    def extra_repr(self) -> str:
        return f"pad={self.pad}, mode={self.mode!r}, value={self.value}"


@builder("Pad", example=Example((3, 4, 5), {"pad": [1, 2, 2, 0], "mode": "reflect"}))
def _pad(p: Params, xs: list[Shape]) -> Call:
    return Call(Pad, (list(p["pad"]), p["mode"], float(p["value"])))


@module_rule(Pad)
def _import_pad(m: Pad, xs: list[fx.Node]) -> Mapped:
    return Mapped("Pad", {"pad": list(m.pad), "mode": m.mode, "value": float(m.value)}, xs)


@module_rule(nn.ZeroPad2d, nn.ConstantPad2d, nn.ReflectionPad2d, nn.ReplicationPad2d, nn.CircularPad2d,
             nn.ConstantPad1d, nn.ReflectionPad1d, nn.ReplicationPad1d)
def _import_pad_module(m: Any, xs: list[fx.Node]) -> Mapped:
    mode = ("reflect" if "Reflection" in type(m).__name__ else "replicate" if "Replication" in type(m).__name__
            else "circular" if "Circular" in type(m).__name__ else "constant")
    return _pad_params(xs[0], list(m.padding), mode, float(getattr(m, "value", 0.0)))


def _pad_params(x: fx.Node, pad: list[int], mode: str, value: Any) -> Mapped:
    if mode != "constant" and any(p < 0 for p in pad):
        raise Unmappable(f"{mode} pad {pad} crops (a negative amount); only constant padding crops")
    if value is not None and not isinstance(value, int | float):
        raise Unmappable(f"pads with value {value!r}; only a fixed number maps")
    return Mapped("Pad", {"pad": [int(p) for p in pad], "mode": mode, "value": float(value or 0.0)}, [x])


@function_rule(F.pad)
def _f_pad(input: Any, pad: Any, mode: str = "constant", value: Any = None) -> Mapped:
    return _pad_params(tensor(input), list(static_ints(pad, "pad")), const(mode, "mode"), const(value, "value"))


# ------------------------------------------------------------------ Unfold
@builder("Unfold", example=Example((2, 5, 6), {"kernel_size": [2, 3], "stride": [1, 2], "padding": [1, 0]}))
def _unfold(p: Params, xs: list[Shape]) -> Call:
    return Call(nn.Unfold, (tuple(p["kernel_size"]),), {"dilation": tuple(p["dilation"]),
                                                         "padding": tuple(p["padding"]), "stride": tuple(p["stride"])})


zero_flops("Unfold")  # a gather (im2col)


def _unfold_params(x: fx.Node, kernel_size: Any, dilation: Any, padding: Any, stride: Any) -> Mapped:
    return Mapped("Unfold", {"kernel_size": pair(const(kernel_size, "kernel_size")),
                             "dilation": pair(const(dilation, "dilation")), "padding": pair(const(padding, "padding")),
                             "stride": pair(const(stride, "stride"))}, [x])


@module_rule(nn.Unfold)
def _import_unfold(m: nn.Unfold, xs: list[fx.Node]) -> Mapped:
    return _unfold_params(xs[0], m.kernel_size, m.dilation, m.padding, m.stride)


@function_rule(F.unfold)
def _f_unfold(input: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1) -> Mapped:
    return _unfold_params(tensor(input), kernel_size, dilation, padding, stride)


# ------------------------------------------------------------------ Fold
@builder("Fold", example=Example((12, 8), {"output_size": [3, 4], "kernel_size": [2, 3], "stride": [1, 2],
                                          "padding": [1, 1]}))
def _fold(p: Params, xs: list[Shape]) -> Call:
    return Call(nn.Fold, (tuple(p["output_size"]), tuple(p["kernel_size"])), {
        "dilation": tuple(p["dilation"]), "padding": tuple(p["padding"]), "stride": tuple(p["stride"])})


zero_flops("Fold")  # a scatter-add (col2im): FlopCounterMode counts none


def _fold_params(x: fx.Node, output_size: Any, kernel_size: Any, dilation: Any, padding: Any, stride: Any) -> Mapped:
    return Mapped("Fold", {"output_size": pair(const(static_ints(output_size, "output_size"), "output_size")),
                           "kernel_size": pair(const(kernel_size, "kernel_size")),
                           "dilation": pair(const(dilation, "dilation")), "padding": pair(const(padding, "padding")),
                           "stride": pair(const(stride, "stride"))}, [x])


@module_rule(nn.Fold)
def _import_fold(m: nn.Fold, xs: list[fx.Node]) -> Mapped:
    return _fold_params(xs[0], m.output_size, m.kernel_size, m.dilation, m.padding, m.stride)


@function_rule(F.fold)
def _f_fold(input: Any, output_size: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
            stride: Any = 1) -> Mapped:
    return _fold_params(tensor(input), output_size, kernel_size, dilation, padding, stride)


# ------------------------------------------------------------------ Roll
class Roll(nn.Module):
    """``torch.roll(x, shifts, dims)``: a cyclic shift along per-sample dims."""

    def __init__(self, shifts: list[int], dims: list[int]) -> None:
        super().__init__()
        self.shifts, self.dims = tuple(shifts), tuple(dims)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.roll(x, self.shifts, self.dims)

    def extra_repr(self) -> str:
        return f"shifts={self.shifts}, dims={self.dims}"


@builder("Roll", example=Example((3, 5, 6), {"shifts": [-1, 2], "dims": [2, 3]}))
def _roll(p: Params, xs: list[Shape]) -> Call:
    return Call(Roll, (list(p["shifts"]), list(p["dims"])))


zero_flops("Roll")  # a copy


@function_rule(torch.roll, methods=("roll",))
def _f_roll(input: Any, shifts: Any, dims: Any = None) -> Mapped:
    if dims is None or dims == []:
        raise Unmappable("torch.roll without dims rolls the flattened tensor, batch included")
    shift_list, dim_list = ([int(v) for v in (x if isinstance(x, list | tuple) else [x])]
                            for x in (static_ints(shifts, "shifts"), const(dims, "dims")))
    if len(shift_list) != len(dim_list):
        raise Unmappable(f"torch.roll with {len(shift_list)} shift(s) for {len(dim_list)} dim(s)")
    value = input.meta.get("val") if isinstance(input, fx.Node) else None
    rank = value.dim() if isinstance(value, torch.Tensor) else 0
    if any(d == 0 or rank and d % rank == 0 for d in dim_list):
        raise Unmappable("torch.roll along the batch dimension")
    return Mapped("Roll", {"shifts": shift_list, "dims": dim_list}, [tensor(input)])


module_rule(Roll)(lambda m, xs: Mapped("Roll", {"shifts": list(m.shifts), "dims": list(m.dims)}, xs))


# ------------------------------------------------------------------ Tile
class Tile(nn.Module):
    """``x.tile(reps)`` along trailing per-sample dims."""

    def __init__(self, reps: list[int]) -> None:
        super().__init__()
        self.reps = tuple(reps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.tile(self.reps)

    def extra_repr(self) -> str:
        return f"reps={self.reps}"


@builder("Tile", example=Example((2, 3, 4), {"reps": [2, 1, 3]}))
def _tile(p: Params, xs: list[Shape]) -> Call:
    return Call(Tile, (list(p["reps"]),))


zero_flops("Tile")  # a copy
module_rule(Tile)(lambda m, xs: Mapped("Tile", {"reps": list(m.reps)}, xs))


@function_rule(torch.tile, methods=("tile",))
def _f_tile(input: Any, *dims: Any) -> Mapped:
    reps = [int(r) for r in static_ints(list(dims[0]) if len(dims) == 1 and isinstance(dims[0], list | tuple)
                                        else list(dims), "reps")]
    rank = _rank(input)
    if len(reps) >= rank and any(r != 1 for r in reps[:len(reps) - rank + 1]):
        raise Unmappable(f"tile {reps} repeats the batch dimension; only per-sample dims map")
    return Mapped("Tile", {"reps": reps[max(len(reps) - rank + 1, 0):]}, [tensor(input)])


@function_rule(methods=("repeat",))
def _f_repeat(input: Any, *sizes: Any) -> Mapped:
    """``x.repeat(1, a, b)`` (the exported program's spelling of tile): the batch repeated once."""
    reps = [int(r) for r in static_ints(list(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], list | tuple)
                                        else list(sizes), "sizes")]
    if len(reps) != _rank(input) or reps[0] != 1:
        raise Unmappable(f"repeat {reps} repeats the batch dimension or adds dims; only per-sample dims map")
    return Mapped("Tile", {"reps": reps[1:]}, [tensor(input)])


def _rank(x: Any) -> int:
    value = tensor(x).meta.get("val")
    if not isinstance(value, torch.Tensor):
        raise Unmappable("tiles a value whose shape is not known")
    return value.dim()
