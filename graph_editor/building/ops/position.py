"""RelativePositionBias: a table of learned biases gathered by position offsets.

The importer finds the gather written out in a forward (``table[:, self.bias_idxs]`` in LeViT and
EfficientFormer, ``table[index.view(-1)].view(N, N, -1).permute(2, 0, 1)`` in Swin-style code) with a graph
fold: the gather and the reshapes after it pick fixed elements of the table, so running them on the numbers
``0 .. table.numel() - 1`` says which element lands where. Where that equals what the layer gathers (for its
window and kind, the table stored either way round) the ops become one RelativePositionBias node holding the
table; anything else is left as it was.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import torch
import torch.nn.functional as F
from torch import fx, nn

from ...analysis.per_node import zero_flops
from ...importer.rules import Mapped, free_module_path, graph_fold, module_rule
from ...model.layers.position import table_rows
from ..modules import Call, Example, Params, Shape, builder


class RelativePositionBias(nn.Module):
    """``table[index]`` as ``[1, heads, N, N]``: each head's learned bias for every pair of window positions."""

    def __init__(self, num_heads: int, window: list[int], kind: str = "relative") -> None:
        super().__init__()
        self.num_heads, self.window, self.kind = num_heads, list(window), kind
        h, w = self.window
        rows = (2 * h - 1) * (2 * w - 1) if kind == "relative" else h * w  # one per signed or absolute offset
        self.table = nn.Parameter(torch.empty(rows, num_heads))
        self.index: torch.Tensor  # computed from the window (a meta tensor on meta), never saved
        self.register_buffer("index", self.offset_index(kind, self.window), persistent=False)
        if not self.table.is_meta:
            nn.init.trunc_normal_(self.table, std=0.02)

    @staticmethod
    def offset_index(kind: str, window: list[int]) -> torch.Tensor:
        """``[N, N]``: the table row for each pair of positions of an h x w window (N = h*w)."""
        h, w = window
        coords = torch.stack(torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")).flatten(1)  # [2, N]
        rel = coords[:, :, None] - coords[:, None, :]
        if kind == "absolute":
            return rel[0].abs() * w + rel[1].abs()
        return (rel[0] + h - 1) * (2 * w - 1) + rel[1] + w - 1

    def forward(self) -> torch.Tensor:
        n = self.window[0] * self.window[1]
        return self.table[self.index.reshape(-1)].reshape(n, n, self.num_heads).permute(2, 0, 1).unsqueeze(0)

    def extra_repr(self) -> str:
        return f"num_heads={self.num_heads}, window={self.window}, kind={self.kind!r}"


@builder("RelativePositionBias", example=Example((2, 4, 4), {"num_heads": 2, "window": [2, 2], "kind": "absolute"}))
def _relative_position_bias(p: Params, xs: list[Shape]) -> Call:
    return Call(RelativePositionBias, (p["num_heads"], list(p["window"]), p["kind"]))


zero_flops("RelativePositionBias")  # a gather


@module_rule(RelativePositionBias)
def _import_relative_position_bias(m: RelativePositionBias, xs: list[fx.Node]) -> Mapped:
    return Mapped("RelativePositionBias", {"num_heads": m.num_heads, "window": list(m.window), "kind": m.kind}, xs)


# ------------------------------------------------------------------ the fold
_RESHAPES = frozenset({"view", "reshape", "permute", "contiguous", "unsqueeze", "flatten", "transpose"})
_ADDS = (operator.add, operator.iadd, torch.add)


@graph_fold("relative position bias")
def fold_relative_position_bias(gm: fx.GraphModule) -> None:
    """``table[index]`` and the reshapes after it, where they gather what a RelativePositionBias does, become a
    call of one (see the module docstring)."""
    changed = False
    for n in list(gm.graph.nodes):
        if n.op == "call_function" and n.target is operator.getitem and not getattr(n, "_erased", False):
            changed |= _fold_one(gm, n)
    if changed:
        gm.recompile()


def _fold_one(gm: fx.GraphModule, gather: fx.Node) -> bool:
    table_node = gather.args[0]
    table = _parameter(gm, table_node)
    if not isinstance(table_node, fx.Node) or table is None or table.dim() != 2 or table.is_meta:
        return False
    end = gather
    while len(end.users) == 1:  # the reshapes that follow, read by nothing else
        user = next(iter(end.users))
        if user.op != "call_method" or user.target not in _RESHAPES or user.args[0] is not end:
            break
        end = user
    needed = _ancestors(end)
    picked = None if needed is None else _evaluate(gm, needed, end, table_node,
                                                   torch.arange(table.numel()).view(table.shape))
    if picked is None or needed is None:
        return False
    if picked.dim() == 4 and picked.shape[0] == 1:
        picked = picked[0]
    elif picked.dim() != 3 or not all(_broadcasts(u, end) for u in end.users):
        return False  # [heads, N, N] read as [1, heads, N, N] only where an addition or a mask broadcasts it alike
    found = _match(picked, table.shape)
    if found is None:
        return False
    heads, window, kind, transposed = found
    path = free_module_path(gm, f"{table_node.target}_bias")
    with torch.device(table.device):
        module = Call(RelativePositionBias, (heads, window, kind)).make()
    with torch.no_grad():
        module.get_parameter("table").copy_(table.detach().t() if transposed else table.detach())
    gm.add_submodule(path, module)
    with gm.graph.inserting_before(end):
        call = gm.graph.call_module(path, ())
    call.meta = dict(end.meta)
    end.replace_all_uses_with(call)
    for node in needed:  # latest first: the gather's ops, then what only they read
        if not node.users:
            gm.graph.erase_node(node)
    return True


def _broadcasts(user: fx.Node, bias: fx.Node) -> bool:
    """Whether ``user`` reads ``bias`` so that a leading dim of 1 changes nothing: an addition, or the mask of
    ``F.scaled_dot_product_attention`` (TinyViT's ``attn_mask=attention_biases[:, idxs]``)."""
    if user.op != "call_function":
        return False
    if user.target is F.scaled_dot_product_attention:
        mask = user.args[3] if len(user.args) > 3 else user.kwargs.get("attn_mask")
        return mask is bias and bias not in user.args[:3]
    return user.target in _ADDS


def _parameter(gm: fx.GraphModule, node: Any) -> torch.Tensor | None:
    if not isinstance(node, fx.Node) or node.op != "get_attr":
        return None
    try:
        return gm.get_parameter(str(node.target))
    except AttributeError:
        return None


def _ancestors(end: fx.Node) -> list[fx.Node] | None:
    """``end`` and every node it is computed from, latest first; None where that includes the input or a
    module call (not a fixed gather)."""
    needed: list[fx.Node] = []
    stack, seen = [end], set()
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        if node.op not in ("get_attr", "call_function", "call_method"):
            return None
        needed.append(node)
        stack.extend(node.all_input_nodes)
    order = {node: i for i, node in enumerate(end.graph.nodes)}
    return sorted(needed, key=order.__getitem__, reverse=True)


def _evaluate(gm: fx.GraphModule, needed: list[fx.Node], end: fx.Node, table_node: fx.Node,
              numbers: torch.Tensor) -> torch.Tensor | None:
    """``end``'s value with the table replaced by ``numbers``: None unless it depends only on the table and
    buffers through plain calls."""
    env: dict[fx.Node, Any] = {}
    try:
        for node in reversed(needed):
            args, kwargs = fx.map_arg((node.args, node.kwargs), env.__getitem__)
            if node is table_node:
                env[node] = numbers
            elif node.op == "get_attr":
                value = _attribute(gm, str(node.target))
                if not isinstance(value, torch.Tensor) or value.is_meta or isinstance(value, nn.Parameter):
                    return None  # a second parameter, or index values unknown (a model built on meta)
                env[node] = value
            elif node.op == "call_method":
                env[node] = getattr(args[0], str(node.target))(*args[1:], **kwargs)
            else:
                env[node] = node.target(*args, **kwargs)  # type: ignore[operator]
    except (RuntimeError, IndexError, TypeError, ValueError):
        return None
    value = env[end]
    return value if isinstance(value, torch.Tensor) and not value.is_floating_point() else None


def _attribute(gm: fx.GraphModule, target: str) -> Any:
    owner: Any = gm
    for part in target.split("."):
        owner = getattr(owner, part, None)
    return owner


def _match(picked: torch.Tensor, table_shape: torch.Size) -> tuple[int, list[int], str, bool] | None:
    """(heads, window, kind, table stored [heads, rows]) when ``picked`` ([heads, N, N] element numbers of the
    table) is what a RelativePositionBias gathers for some h x w window (h * w = N), else None."""
    heads, n, m = picked.shape
    if n != m:
        return None
    head = torch.arange(heads).view(heads, 1, 1)
    for window in ([h, n // h] for h in range(1, n + 1) if n % h == 0):
        for kind in ("relative", "absolute"):
            rows = table_rows(kind, window)
            if rows * heads != math.prod(table_shape):
                continue
            index = RelativePositionBias.offset_index(kind, window)
            for transposed, shape, numbers in ((False, (rows, heads), index * heads + head),
                                               (True, (heads, rows), head * rows + index)):
                if tuple(table_shape) == shape and torch.equal(picked, numbers):
                    return heads, window, kind, transposed
    return None
