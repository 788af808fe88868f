"""Two ways attention code is written that the rules do not read, rewritten into ones they do (issue 23).

SAM's encoder (timm's ``vision_transformer_sam``) takes its heads apart as
``qkv.permute(2, 0, 3, 1, 4).reshape(3, B * heads, N, -1).unbind(0)`` (the batch folded with the heads behind
a leading 3) and builds its decomposed relative-position bias with ``einsum("bhwc,hkc->bhwk", q, Rh)``; MViTv2
writes the same bias with five letters. :func:`unbind_before_reshape` moves the unbind before the reshape (the
permute's parts, then each part's fold into the batch, both read by the rules already); :func:`einsum_as_matmul`
writes such an einsum as the matrix product it is, so that ``Rh`` (a parameter gathered by a fixed index) is a
Computed node read by a MatMul. MViTv2 then adds that bias by writing the whole attention map in place
(``attn[:, :, 0:, 0:] = ...``, an ``aten.copy_`` into the product's output): :func:`whole_writes` has the
readers after the write read the written value instead.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
from torch import fx

_UNBIND = ("unbind", torch.unbind, torch.ops.aten.unbind.int)
# ops whose output is a tensor of its own, never a view of their input
_FRESH = {torch.matmul, operator.matmul, operator.add, operator.sub, operator.mul, operator.truediv}
_VIEWS = {"view", "reshape", "permute", "transpose", "expand", "contiguous", "unsqueeze", "squeeze", "flatten"}


def whole_writes(gm: fx.GraphModule) -> None:
    """``aten.copy_(x, v)`` of a ``v`` of ``x``'s shape into an ``x`` that is no view (a product's output) as
    ``v`` for what reads ``x`` after it, where no view of ``x`` taken before is read after it."""
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    for n in list(gm.graph.nodes):
        if n.op != "call_function" or n.target is not torch.ops.aten.copy_.default or len(n.args) != 2:
            continue
        x, v = n.args
        if not isinstance(x, fx.Node) or not isinstance(v, fx.Node):
            continue
        before, value = x.meta.get("val"), v.meta.get("val")
        if not isinstance(before, torch.Tensor) or not isinstance(value, torch.Tensor) or before.shape != value.shape:
            continue
        if not (x.op == "call_module" or x.op == "call_function" and x.target in _FRESH):
            continue
        earlier = [u for u in x.users if order[u] < order[n] and (u.target in _VIEWS or u.target is operator.getitem)]
        if any(order[w] > order[n] for u in earlier for w in u.users):
            continue
        later = [u for u in x.users if order[u] > order[n]]
        for u in [*later, *n.users]:
            u.replace_input_with(x if u in later else n, v)
        gm.graph.erase_node(n)


def unbind_before_reshape(gm: fx.GraphModule) -> None:
    """``x.reshape(k, *rest).unbind(0)`` where ``x`` leads with ``k`` as ``[p.reshape(*rest) for p in
    x.unbind(0)]``: the same parts, each reshaped alone."""
    for n in list(gm.graph.nodes):
        dims = _reshape_dims(n)
        x = n.args[0] if n.args else None
        lead = x.meta.get("val") if isinstance(x, fx.Node) else None
        if (dims is None or not isinstance(dims[0], int) or not isinstance(lead, torch.Tensor) or not lead.dim()
                or not isinstance(lead.shape[0], int) or lead.shape[0] != dims[0] or not n.users
                or not all(_whole_unbind(u) for u in n.users)):
            continue
        for u in list(n.users):
            with gm.graph.inserting_before(u):
                parts = gm.graph.call_function(torch.unbind, (x, 0))
            parts.meta = _meta(u)
            for pick in list(u.users):
                with gm.graph.inserting_before(pick):
                    part = gm.graph.call_function(operator.getitem, (parts, pick.args[1]))
                    shaped = gm.graph.call_method("reshape", (part, list(dims[1:])))
                part.meta, shaped.meta = _meta(pick), _meta(n)
                pick.replace_all_uses_with(shaped)
                gm.graph.erase_node(pick)
            gm.graph.erase_node(u)
        gm.graph.erase_node(n)


def einsum_as_matmul(gm: fx.GraphModule) -> None:
    """``einsum("...msc,skc->...msk")`` or ``("...smc,skc->...smk")`` (a contraction over the last dim of both,
    the second operand's first dim one of the first's two before it) as ``a @ b.transpose(-1, -2)``, the first
    operand's two dims swapped around it where the shared dim is the second of them."""
    for n in list(gm.graph.nodes):
        found = _einsum(n)
        if found is None:
            continue
        swap = _matmul_form(found[0])
        if swap is None:
            continue
        a, b = found[1]
        with gm.graph.inserting_before(n):
            x = gm.graph.call_method("transpose", (a, -3, -2)) if swap else a
            w = gm.graph.call_method("transpose", (b, -1, -2))
            y = gm.graph.call_function(torch.matmul, (x, w))
            out = gm.graph.call_method("transpose", (y, -3, -2)) if swap else y
        for made in {x, w, y, out} - {a}:
            made.meta = _meta(n)
        n.replace_all_uses_with(out)
        gm.graph.erase_node(n)


def _matmul_form(equation: str) -> bool | None:
    """Whether the shared dim is the second of the two before the contracted one (the operand's dims swapped
    around the product); None where the equation is not of this form."""
    spec = equation.replace(" ", "")
    if "->" not in spec or "." in spec:
        return None
    inputs, out = spec.split("->")
    if inputs.count(",") != 1:
        return None
    a, b = inputs.split(",")
    if len(b) != 3 or len(a) < 3 or any(len(set(t)) != len(t) for t in (a, b, out)):
        return None
    s, k, c = b[0], b[1], b[2]
    if a[-1] != c or c in out or k in a or out != a[:-1] + k or s not in a[-3:-1]:
        return None
    return a[-2] == s


def _einsum(n: fx.Node) -> tuple[str, list[Any]] | None:
    if n.op != "call_function" or n.target not in (torch.einsum, torch.ops.aten.einsum.default) or not n.args:
        return None
    eq, *ops = n.args
    if len(ops) == 1 and isinstance(ops[0], list | tuple):
        ops = list(ops[0])
    if not isinstance(eq, str) or len(ops) != 2 or not all(isinstance(o, fx.Node) for o in ops):
        return None
    return eq, ops


def _reshape_dims(n: fx.Node) -> list[Any] | None:
    if n.op != "call_method" or n.target not in ("reshape", "view") or len(n.args) < 2:
        return None
    dims = list(n.args[1]) if len(n.args) == 2 and isinstance(n.args[1], list | tuple) else list(n.args[1:])
    return dims or None


def _whole_unbind(u: fx.Node) -> bool:
    """``.unbind(0)`` whose parts are each picked by a number."""
    dim = u.args[1] if len(u.args) > 1 else u.kwargs.get("dim", 0)
    return bool(u.target in _UNBIND and dim == 0 and u.users and all(
        p.target is operator.getitem and isinstance(p.args[1], int) for p in u.users))


def _meta(n: fx.Node) -> dict[str, Any]:
    """``n``'s meta for a node made in its place: its module stack and source line, not its value."""
    return {k: v for k, v in n.meta.items() if k != "val"}
