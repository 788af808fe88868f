"""Layers an exported program spells as several ATen ops, each found and lifted as one layer module (issue 23).

torch.export decomposes what a library writes by hand into its ops: timm's RMS norms into ``x * rsqrt(mean(x ** 2)
+ eps) * w`` (SimpleNorm's the variance), its weight-standardised convolutions into a batch norm of the weight
feeding ``aten.conv2d``, its MaxPool2dSame into a -inf ``aten.pad`` before ``aten.max_pool2d``. Each pattern found
whole becomes a call of the catalog's layer module (RMSNorm, RMSNorm2d, StdConv2d, MaxPool2d with 'SAME' padding),
holding the model's own weights, placed at the path of the module the ops came from; anything else is left as it
was and reported where no rule maps it. A concatenation's empty parts are left out. A LayerNorm without weights (``aten.layer_norm(x, shape, None, None)``)
and ``aten.rms_norm`` are lifted here too: the weight-keyed lifting of :mod:`.aten` has no weight to name them by.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch
from torch import fx, nn

from ..building.ops.conv import StdConv2d
from ..building.ops.norm import RMSNorm, RMSNorm2d
from ..building.ops.pooling import MaxPool2dSame
from ..model.layers.pooling import same_padding

A = torch.ops.aten


class _Lifter(Protocol):
    """What :mod:`.aten`'s lifter offers the patterns: the graph, the tensor a ``get_attr`` reads, and a node replaced
    by a call of a layer module placed at a module's path."""

    gm: fx.GraphModule

    def tensor(self, a: Any) -> torch.Tensor | None: ...

    def put(self, n: fx.Node, module: nn.Module, owner: str, x: fx.Node) -> None: ...


def lift_layers(lifter: _Lifter) -> None:
    """Every pattern of the program's graph found whole, replaced by a call of its layer module."""
    for n in list(lifter.gm.graph.nodes):
        if n.op != "call_function" or getattr(n, "_erased", False):
            continue
        if n.target is A.rsqrt.default:
            _rms_norm(lifter, n)
        elif n.target is A.rms_norm.default:
            _aten_rms_norm(lifter, n)
        elif n.target is A.conv2d.default:
            _std_conv(lifter, n)
        elif n.target is A.max_pool2d.default:
            _max_pool_same(lifter, n)
        elif n.target is A.layer_norm.default and _arg(n, 2) is None and _arg(n, 3) is None:
            _layer_norm_without_weights(lifter, n)
        elif n.target is A.cat.default:
            _without_empty_parts(n)


def _without_empty_parts(n: fx.Node) -> None:
    """A concatenation's parts that hold nothing along its dim left out (EVA's rotary attention joins
    ``q[:, :, :0]``, no prefix tokens, to the rotated rest): the same values, and no empty Slice node."""
    parts, dim = _arg(n, 0), _arg(n, 1, 0)
    values = [_value(p) for p in parts] if isinstance(parts, list | tuple) else []
    if not values or any(v is None for v in values):
        return
    kept = [p for p, v in zip(parts, values, strict=True) if v is not None and v.shape[dim] != 0]
    if kept and len(kept) < len(parts):
        n.args = (kept, *n.args[1:])


def _arg(n: Any, pos: int, default: Any = None) -> Any:
    return n.args[pos] if isinstance(n, fx.Node) and pos < len(n.args) else default


def _is(n: Any, *targets: Any) -> bool:
    return isinstance(n, fx.Node) and n.target in targets


def _value(n: Any) -> torch.Tensor | None:
    val = n.meta.get("val") if isinstance(n, fx.Node) else None
    return val if isinstance(val, torch.Tensor) else None


def owner(n: fx.Node) -> str:
    """The path of the module an op was written in (its ``nn_module_stack``), "" at the top."""
    stack = n.meta.get("nn_module_stack") or {}
    return next(reversed(stack.values()))[0] if stack else ""


def _erase(gm: fx.GraphModule, *nodes: Any) -> None:
    """The nodes a lifted pattern no longer needs, in the order given, each only once nothing reads it."""
    for n in nodes:
        if isinstance(n, fx.Node) and not n.users and not getattr(n, "_erased", False) and n.op != "placeholder":
            gm.graph.erase_node(n)


def _parameter(lifter: _Lifter, n: Any) -> nn.Parameter | None:
    t = lifter.tensor(n)
    return t if isinstance(t, nn.Parameter) else None


def _only_user(n: fx.Node) -> fx.Node | None:
    return next(iter(n.users)) if len(n.users) == 1 else None


# ------------------------------------------------------------------ RMS norms
def _rms_norm(lifter: _Lifter, r: fx.Node) -> None:
    """``x * rsqrt(mean(x ** 2, dims, True) + eps)`` (or ``var(x, dims, unbiased, True)``), then ``* w`` or
    ``* w.reshape(1, -1, 1, 1)``: RMSNorm over trailing dims, or RMSNorm2d over the channels."""
    add, mul = _arg(r, 0), _only_user(r)
    if mul is None or not _is(add, A.add.Tensor) or not isinstance(_arg(add, 1), float) or len(add.users) != 1:
        return
    stat = _arg(add, 0)
    if _is(stat, A.mean.dim) and _is(_arg(stat, 0), A.pow.Tensor_Scalar) and _arg(_arg(stat, 0), 1) == 2:
        x, divide_by, square = _arg(_arg(stat, 0), 0), "rms", _arg(stat, 0)
    elif _is(stat, A.var.dim) and _arg(stat, 2, True) is True:
        x, divide_by, square = _arg(stat, 0), "std", None
    else:
        return
    xv, dims = _value(x), _arg(stat, 1)
    if xv is None or not _is(mul, A.mul.Tensor) or set(mul.args) != {x, r} or _arg(stat, 3 if square is None else 2) \
            is not True or not isinstance(dims, list | tuple):
        return
    rank = xv.dim()
    dims = sorted(int(d) % rank for d in dims)
    two_d = rank == 4 and dims == [1]
    if not two_d and (0 in dims or dims != list(range(rank - len(dims), rank))):
        return
    shape = [int(xv.shape[1])] if two_d else [int(d) for d in xv.shape[rank - len(dims):]]
    end, weight, reshape = _rms_weight(lifter, mul, two_d, shape)
    eps = float(_arg(add, 1))
    with torch.device("meta"):
        module: nn.Module = RMSNorm2d(shape[0], eps, weight is not None, divide_by) if two_d else RMSNorm(
            shape, eps, weight is not None, divide_by)
    if weight is not None:
        module.weight = weight
    lifter.put(end, module, owner(r), x)
    _erase(lifter.gm, reshape, mul, r, add, stat, square)


def _rms_weight(lifter: _Lifter, mul: fx.Node, two_d: bool, shape: list[int],
                ) -> tuple[fx.Node, nn.Parameter | None, fx.Node | None]:
    """The norm's last op and its weight: ``mul`` and None where the next op is not a product with a weight of
    the norm's shape (``[C]`` reshaped to ``[1, C, 1, 1]`` in the 2-D norm)."""
    nxt = _only_user(mul)
    if nxt is None or not _is(nxt, A.mul.Tensor) or _arg(nxt, 0) is not mul:
        return mul, None, None
    w = _arg(nxt, 1)
    reshape = w if two_d and _is(w, A.reshape.default, A.view.default) and list(_arg(w, 1)) == [1, -1, 1, 1] else None
    param = _parameter(lifter, _arg(reshape, 0) if reshape is not None else w)
    if param is None or list(param.shape) != shape or two_d and reshape is None:
        return mul, None, None
    return nxt, param, reshape


def _aten_rms_norm(lifter: _Lifter, n: fx.Node) -> None:
    """``aten.rms_norm(x, shape, weight, eps)`` (F.rms_norm, nn.RMSNorm) as RMSNorm."""
    x, shape, weight, eps = (_arg(n, i) for i in range(4))
    param = _parameter(lifter, weight)
    if weight is not None and param is None:
        return
    eps = float(eps) if eps is not None else float(torch.finfo(torch.float32).eps)
    with torch.device("meta"):
        module = RMSNorm(list(shape), eps, param is not None)
    if param is not None:
        module.weight = param
    lifter.put(n, module, owner(n), x)


def _layer_norm_without_weights(lifter: _Lifter, n: fx.Node) -> None:
    with torch.device("meta"):
        module = nn.LayerNorm(list(_arg(n, 1)), eps=float(_arg(n, 4, 1e-5)), elementwise_affine=False)
    lifter.put(n, module, owner(n), _arg(n, 0))


# ------------------------------------------------------------------ weight-standardised convolutions
def _std_conv(lifter: _Lifter, n: fx.Node) -> None:
    """``conv2d(x, batch_norm(w.reshape(1, O, -1), g, None, None, None, True, m, eps).reshape_as(w), b, ...)``, ``g``
    None or ``(gain * scale).view(-1)``: timm's StdConv2d and ScaledStdConv2d as StdConv2d."""
    std = _arg(n, 1)
    if not _is(std, A.reshape_as.default) or len(std.users) != 1:
        return
    bn, w = _arg(std, 0), _arg(std, 1)
    weight, flat = _parameter(lifter, w), _arg(bn, 0)
    if weight is None or not _is(bn, A.batch_norm.default) or not _is(flat, A.reshape.default) or _arg(flat, 0) is not w \
            or list(_arg(flat, 1)) != [1, weight.shape[0], -1] or any(_arg(bn, i) is not None for i in (2, 3, 4)) \
            or _arg(bn, 5) is not True:
        return
    gain, scale, view, mul = _gain(lifter, _arg(bn, 1))
    if gain is False:
        return
    bias = _arg(n, 2)
    if bias is not None and _parameter(lifter, bias) is None:
        return
    stride, padding, dilation, groups = (_arg(n, i, d) for i, d in ((3, [1, 1]), (4, [0, 0]), (5, [1, 1]), (6, 1)))
    fan_in = weight[0].numel()
    with torch.device("meta"):
        conv = StdConv2d(weight.shape[1] * groups, weight.shape[0], tuple(weight.shape[2:]), stride, padding, dilation,
                         groups, bias is not None, float(_arg(bn, 7)), gain is not None,
                         scale * fan_in ** 0.5 if gain is not None else 1.0)
    conv.weight = weight
    conv.bias = _parameter(lifter, bias) if bias is not None else None
    if gain is not None:
        conv.gain = gain
    lifter.put(n, conv, str(w.target).rpartition(".")[0], _arg(n, 0))
    _erase(lifter.gm, std, bn, flat, view, mul)


def _gain(lifter: _Lifter, g: Any) -> tuple[Any, float, Any, Any]:
    """The batch norm's weight: (None, 1.0, ...) where it has none; (gain, scale, view, mul) for
    ``(gain * scale).view(-1)``; (False, ...) for anything else."""
    if g is None:
        return None, 1.0, None, None
    mul = _arg(g, 0)
    if not _is(g, A.view.default, A.reshape.default) or list(_arg(g, 1)) != [-1] or not _is(mul, A.mul.Tensor) \
            or not isinstance(_arg(mul, 1), float):
        return False, 1.0, None, None
    gain = _parameter(lifter, _arg(mul, 0))
    return (gain, float(_arg(mul, 1)), g, mul) if gain is not None else (False, 1.0, None, None)


# ------------------------------------------------------------------ max pooling with 'SAME' padding
def _max_pool_same(lifter: _Lifter, n: fx.Node) -> None:
    """``max_pool2d(pad(x, same, -inf), k, s, 0, d)`` (timm's MaxPool2dSame at the import's shape) as MaxPool2d
    with ``same``, which computes its padding from the input as timm does."""
    pad, k, s = _arg(n, 0), _arg(n, 1), _arg(n, 2)
    padding, dilation, ceil = _arg(n, 3, [0, 0]), _arg(n, 4, [1, 1]), _arg(n, 5, False)
    if not _is(pad, A.pad.default, A.constant_pad_nd.default) or len(pad.users) != 1 or any(padding):
        return
    x = _arg(pad, 0)
    value = _arg(pad, 3) if pad.target is A.pad.default else _arg(pad, 2)
    xv = _value(x)
    if value != -float("inf") or xv is None or xv.dim() != 4 or (pad.target is A.pad.default and _arg(pad, 2)
                                                                  != "constant"):
        return
    k, s, d = (list(v) * (2 // len(v)) for v in (k, s or k, dilation))
    want = []
    for i in (1, 0):  # F.pad's order: width first
        total = same_padding(int(xv.shape[2 + i]), k[i], s[i], d[i])
        want += [total // 2, total - total // 2]
    if list(_arg(pad, 1)) != want:
        return
    module = MaxPool2dSame(tuple(k), tuple(s), 0, tuple(d), bool(ceil))
    lifter.put(n, module, owner(n), x)
    _erase(lifter.gm, pad)
