"""The exported program's ATen graph in the form the importer's rules read (issue 23).

Where ``torch.fx`` cannot trace a model (Python on sizes: ``if H != self.window_size``,
``int(math.sqrt(T))``, ``math.ceil(x / stride)``), the model is captured with ``torch.export``
(:func:`.capture.capture`: non-strict, the batch dynamic, other sizes specialised at the import's
shape). :func:`aten_graph` rewrites that program's ATen ops into the calls the import rules already map:
an op on weights (``aten.conv2d``, ``aten.linear``, ``aten.batch_norm``, ``aten.layer_norm``,
``aten.group_norm``) becomes a call of the layer module holding those weights, named after the module
that owns them (so blocks and node ids follow the model's own hierarchy); the other core ops become the
torch function or tensor method of the same meaning (``aten.add.Tensor`` is ``a + b``, ``aten.reshape`` is
``x.reshape``, ``aten.slice.Tensor`` is ``x[:, a:b]``). An op without an equivalent is left as it is and
reported by the conversion like any op no catalog layer does.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import fx, nn
from torch.export import ExportedProgram

from .aten_layers import lift_layers
from .constants import fold_constants

A = torch.ops.aten
_MAX = 2**63 - 1  # aten's "to the end" of a slice

# aten op -> the torch function with the same positional arguments
FUNCTIONS: dict[Any, Callable[..., Any]] = {
    A.relu.default: F.relu, A.relu_.default: F.relu, A.silu.default: F.silu, A.silu_.default: F.silu,
    A.gelu.default: F.gelu, A.gelu_.default: F.gelu, A.hardswish.default: F.hardswish,
    A.hardswish_.default: F.hardswish, A.hardsigmoid.default: F.hardsigmoid, A.hardsigmoid_.default: F.hardsigmoid,
    A.sigmoid.default: torch.sigmoid, A.sigmoid_.default: torch.sigmoid, A.tanh.default: torch.tanh,
    A.mish.default: F.mish, A.elu.default: F.elu, A.leaky_relu.default: F.leaky_relu,
    A.leaky_relu_.default: F.leaky_relu,
    A.add.Tensor: operator.add, A.add_.Tensor: operator.add, A.mul.Tensor: operator.mul, A.mul_.Tensor: operator.mul,
    A.sub.Tensor: operator.sub, A.div.Tensor: operator.truediv, A.div_.Tensor: operator.truediv, A.rsub.Scalar: torch.rsub,
    A.matmul.default: torch.matmul, A.bmm.default: torch.bmm, A.cat.default: torch.cat, A.stack.default: torch.stack,
    A.flatten.using_ints: torch.flatten, A.roll.default: torch.roll, A.squeeze.dim: torch.squeeze,
    A.split.Tensor: torch.split, A.split_with_sizes.default: torch.split, A.chunk.default: torch.chunk,
    A.unbind.int: torch.unbind, A.softmax.int: F.softmax, A.log_softmax.int: F.log_softmax,
    A.scaled_dot_product_attention.default: F.scaled_dot_product_attention, A.mean.dim: torch.mean,
    A.sum.dim_IntList: torch.sum, A.amax.default: torch.amax,
    A.adaptive_avg_pool2d.default: F.adaptive_avg_pool2d, A.max_pool2d.default: F.max_pool2d,
    A.avg_pool2d.default: F.avg_pool2d, A.dropout.default: F.dropout, A.narrow.default: torch.narrow,
    A.pad.default: F.pad, A.pow.Tensor_Scalar: torch.pow, A.neg.default: torch.neg, A.col2im.default: F.fold,
    A.constant_pad_nd.default: F.pad, A.swapaxes.default: torch.swapaxes,
}
# aten op -> the tensor method of the same name and arguments
METHODS: dict[Any, str] = {
    A.reshape.default: "reshape", A.view.default: "view", A.permute.default: "permute",
    A.transpose.int: "transpose", A.expand.default: "expand", A.sym_size.int: "size", A.contiguous.default: "contiguous",
    A.clone.default: "contiguous", A.alias.default: "contiguous",
    A.repeat.default: "repeat", A.tile.default: "tile",
    A.unsqueeze.default: "unsqueeze",  # a method, as the relative-position fold reads the reshapes after a gather
}
_DROPPED = {A._assert_tensor_metadata.default, A._assert_scalar.default}  # checks, no values


def aten_graph(ep: ExportedProgram) -> fx.GraphModule:
    """``ep`` as an fx graph of the calls the import rules map, its weights in layer modules."""
    gm = ep.module(check_guards=False)
    for n in list(gm.graph.nodes):
        if n.op == "call_function" and n.target in _WRAPPERS:
            _inline(gm, n, _WRAPPERS[n.target])
    fold_constants(gm, skip=_DROPPED)
    lifter = _Lifter(gm)
    lift_layers(lifter)  # several ops that are one layer: RMS norms, standardised convolutions, 'SAME' max pools
    for n in list(gm.graph.nodes):
        if n.op != "call_function":
            continue
        if n.target is A.div.Tensor and _normalize(n) or n.target is A.repeat.default and _repeat_to_batch(n):
            continue  # F.normalize's decomposition, a repeat to the batch: now the calls the rules read
        if n.target is A.linear.default:
            _split_computed_bias(gm, n, lifter)  # then lifted without its bias, as any linear
        if n.target in _DROPPED:
            gm.graph.erase_node(n)
        elif n.target in _LIFTS:
            lifter.lift(n, _LIFTS[n.target])
        elif n.target in FUNCTIONS:
            n.target = FUNCTIONS[n.target]
        elif n.target in METHODS:
            n.op, n.target = "call_method", METHODS[n.target]
        elif n.target in (A.slice.Tensor, A.select.int):
            _index(gm, n)
        elif n.target in _CASTS and _same_dtype(n):
            n.replace_all_uses_with(_a(n)[0])
            gm.graph.erase_node(n)
        elif n.target in _UPSAMPLE:
            _upsample(n)
        elif n.target is A.reshape_as.default:
            _reshape_as(gm, n)
        elif n.target is A.index.Tensor:  # table[:, idxs]: the gather the relative-position fold reads
            x, indices = _a(n)
            n.target, n.args = operator.getitem, (x, tuple(slice(None) if i is None else i for i in indices))
    for n in list(gm.graph.nodes):  # pytree plumbing of the unlifted module: a graph has one input
        if n.op == "placeholder" and not n.users:
            gm.graph.erase_node(n)
        elif not isinstance(n.meta.get("val"), torch.Tensor):  # a size (SymInt): the rules read "val" as a
            n.meta.pop("val", None)                            # tensor's, and trace a size to the batch

    return fx.GraphModule(lifter.root(), gm.graph, type(gm).__name__)


# Regions torch.export keeps as a call of a subgraph: ``with torch.autocast(..., enabled=False)`` (timm's
# EfficientViT attention), ``with torch.no_grad()``; (the wrapper, how many arguments precede the subgraph).
# Inlined: a float32 graph computes the same; the region's own autocast setting is not kept.
_WRAPPERS = {torch.ops.higher_order.wrap_with_autocast: 4, torch.ops.higher_order.wrap_with_set_grad_enabled: 1}


def _inline(gm: fx.GraphModule, n: fx.Node, skip: int) -> None:
    """The subgraph ``n`` calls, copied in its place."""
    sub_node, *operands = _a(n)[skip:]
    sub = getattr(gm, str(sub_node.target))
    placeholders = [p for p in sub.graph.nodes if p.op == "placeholder"]
    env: dict[fx.Node, Any] = dict(zip(placeholders, operands, strict=True))
    out: Any = None
    with gm.graph.inserting_before(n):
        for node in sub.graph.nodes:
            if node.op == "placeholder":
                continue
            if node.op == "output":
                out = fx.map_arg(node.args[0], lambda a: env[a])
                continue
            env[node] = gm.graph.node_copy(node, lambda a: env[a])
    for user in list(n.users):  # the wrapper returns a tuple: its users pick from it
        if user.target is operator.getitem:
            user.replace_all_uses_with(out[user.args[1]])
            gm.graph.erase_node(user)
    gm.graph.erase_node(n)
    if isinstance(sub_node, fx.Node) and not sub_node.users:
        gm.graph.erase_node(sub_node)


_CASTS = {A.to.dtype, A.to.dtype_layout, A._to_copy.default, A.type_as.default}
_UPSAMPLE = {A.upsample_nearest2d.vec: "nearest", A.upsample_bilinear2d.vec: "bilinear",
             A.upsample_bicubic2d.vec: "bicubic", A._upsample_nearest_exact2d.vec: "nearest-exact",
             A._upsample_bilinear2d_aa.vec: "bilinear", A._upsample_bicubic2d_aa.vec: "bicubic"}
_ANTIALIASED = {A._upsample_bilinear2d_aa.vec, A._upsample_bicubic2d_aa.vec}


def _same_dtype(n: fx.Node) -> bool:
    """A cast to the dtype its input already has (``x.float()`` of a float32 tensor): nothing happens."""
    x = _a(n)[0].meta.get("val") if isinstance(_a(n)[0], fx.Node) else None
    out = n.meta.get("val")
    return isinstance(x, torch.Tensor) and isinstance(out, torch.Tensor) and x.dtype == out.dtype


def _upsample(n: fx.Node) -> None:
    """``aten.upsample_*2d.vec(x, size, [align_corners,] scales)`` as ``F.interpolate``."""
    target: Any = n.target
    mode = _UPSAMPLE[target]
    x, size, *rest = _a(n)
    kwargs: dict[str, Any] = {"size": size, "scale_factor": rest[-1] if rest else None, "mode": mode}
    if mode in ("bilinear", "bicubic"):
        kwargs["align_corners"] = rest[0] if len(rest) > 1 else None
    if kwargs["size"] is not None:
        kwargs["scale_factor"] = None
    if target in _ANTIALIASED:
        kwargs["antialias"] = True
    n.target, n.args, n.kwargs = F.interpolate, (x,), kwargs
    before, after = (v.meta.get("val") for v in (x, n))
    if isinstance(before, torch.Tensor) and isinstance(after, torch.Tensor) and before.shape == after.shape:
        # to its own size, x itself in every mode (timm resamples position embeddings so while exporting only)
        n.op, n.target, n.args, n.kwargs = "call_method", "contiguous", (x,), {}


def _normalize(n: fx.Node) -> bool:
    """``x / linalg_vector_norm(x, p, [d], True).clamp_min(eps).expand_as(x)``, F.normalize's decomposition,
    as ``F.normalize(x, p, d, eps)`` (XCiT's and SwinV2's cosine attention); False where it is not that."""
    x, denom = _a(n)
    chain = []
    for op in (A.expand_as.default, A.clamp_min.default, A.linalg_vector_norm.default):
        if not isinstance(denom, fx.Node) or denom.target is not op:
            return False
        chain.append(denom)
        denom = _a(denom)[0]
    expand, clamp, norm = chain
    args = [*_a(norm), None, None, None][:4]
    if denom is not x or _a(expand)[1] is not x or len(args[2] or []) != 1 or args[3] is not True:
        return False
    n.target, n.args, n.kwargs = F.normalize, (x,), {"p": float(args[1]), "dim": int(args[2][0]),
                                                      "eps": float(_a(clamp)[1])}
    for step in chain:  # the norm, its clamp and expand, now read by nothing
        if not step.users:
            n.graph.erase_node(step)
    return True


def _repeat_to_batch(n: fx.Node) -> bool:
    """``t.repeat(B, 1, ...)`` of a batch-1 tensor (XCiT's position encoding) as ``t.expand(B, -1, ...)``: the same
    values, as ExpandBatch maps it; False where it repeats anything else."""
    t, repeats = _a(n)
    val = t.meta.get("val") if isinstance(t, fx.Node) else None
    if not isinstance(val, torch.Tensor) or val.dim() != len(repeats) or val.shape[0] != 1 or any(
            r != 1 for r in repeats[1:]):
        return False
    n.op, n.target, n.args = "call_method", "expand", (t, repeats[0], *[-1] * (len(repeats) - 1))
    return True


def _split_computed_bias(gm: fx.GraphModule, n: fx.Node, lifter: _Lifter) -> None:
    """``aten.linear(x, w, b)`` with ``b`` computed in forward (BEiT's ``cat((q_bias, zeros, v_bias))``) as
    ``linear(x, w) + b``: the layer holds its weight, the bias becomes a Computed node added after it."""
    bias = _arg(n, 2, None)
    if not isinstance(bias, fx.Node) or lifter.tensor(bias) is not None or lifter.tensor(_a(n)[1]) is None:
        return
    n.args = (*_a(n)[:2], None)
    with gm.graph.inserting_after(n):
        add = gm.graph.call_function(operator.add, (n, bias))
    add.meta = dict(n.meta)
    n.replace_all_uses_with(add, delete_user_cb=lambda u: u is not add)


def _reshape_as(gm: fx.GraphModule, n: fx.Node) -> None:
    """``y.reshape_as(x)`` (LeViT's ``bn(x.flatten(0, 1)).reshape_as(x)``) as ``y.reshape(x.size(0), *rest)``: the
    batch read from ``x``, the other sizes as captured."""
    y, other = _a(n)
    val = other.meta.get("val") if isinstance(other, fx.Node) else None
    if not isinstance(val, torch.Tensor) or any(not isinstance(d, int) for d in val.shape[1:]):
        return  # left as the aten op: reported where no rule maps it
    with gm.graph.inserting_before(n):
        batch = gm.graph.call_method("size", (other, 0))
    n.op, n.target, n.args = "call_method", "reshape", (y, [batch, *(int(d) for d in val.shape[1:])])


def _index(gm: fx.GraphModule, n: fx.Node) -> None:
    """``aten.slice.Tensor(x, dim, start, end, step)`` as ``x[:, start:end:step]`` (the whole of it: ``x``),
    ``aten.select.int(x, dim, i)`` as ``x[:, i]``."""
    x, dim, *rest = _a(n)
    if n.target is A.select.int:
        part: Any = rest[0]
    else:
        start, end, step = [*rest, None, None, None][:3]
        part = slice(None if start in (None, 0) else start, None if end in (None, _MAX) else end,
                     None if step in (None, 1) else step)
        if part == slice(None):
            n.replace_all_uses_with(x)
            gm.graph.erase_node(n)
            return
    # x[i] as fx traces it (not x[(i,)]): the picks of a permute's parts read so (convert's _unbind_follows)
    n.target, n.args = operator.getitem, (x, (*[slice(None)] * int(dim), part) if dim or isinstance(part, slice) else part)


class _Lifter:
    """Layer modules made from the weights an op reads, each at the path of the module owning them."""

    def __init__(self, gm: fx.GraphModule) -> None:
        self.gm = gm
        self.modules: dict[str, nn.Module] = {}
        self.by_weight: dict[str, str] = {}  # the weight's path -> the module made from it (a shared weight)

    def tensor(self, a: Any) -> torch.Tensor | None:
        if not isinstance(a, fx.Node) or a.op != "get_attr":
            return None
        t = self.gm
        for part in str(a.target).split("."):
            t = getattr(t, part)
        return t if isinstance(t, torch.Tensor) else None

    def lift(self, n: fx.Node, make: Callable[[_Lifter, fx.Node], tuple[nn.Module, fx.Node] | None]) -> None:
        made = make(self, n)
        if made is None:
            return  # left as the aten op: reported where no rule maps it
        module, weight = made
        path = self.by_weight.get(str(weight.target))
        if path is None:
            path = self._place(module, str(weight.target).rpartition(".")[0])
            self.by_weight[str(weight.target)] = path
        self._call(n, path, _a(n)[0])

    def put(self, n: fx.Node, module: nn.Module, owner: str, x: fx.Node) -> None:
        """``n`` replaced by a call of ``module`` on ``x``, the module placed at ``owner``'s path (or beside it)."""
        self._call(n, self._place(module, owner), x)

    def _place(self, module: nn.Module, owner: str) -> str:
        owner = owner or "layer"
        path, i = owner, 2
        while path in self.modules:
            path, i = f"{owner}_{i}", i + 1
        self.modules[path] = module
        return path

    def _call(self, n: fx.Node, path: str, x: fx.Node) -> None:
        with self.gm.graph.inserting_before(n):  # a new node, named after the module as fx names a call (the
            call = self.gm.graph.create_node("call_module", path, (x,))  # module joins the root made afterwards)
        call.meta = n.meta
        n.replace_all_uses_with(call)
        self.gm.graph.erase_node(n)

    def root(self) -> nn.Module:
        """A module holding the lifted layers and every tensor a get_attr still reads, at their paths (a
        path under a lifted layer gets its own name beside it)."""
        root = nn.Module()
        for n in list(self.gm.graph.nodes):
            if n.op == "get_attr" and not n.users:  # a weight now read by its layer module
                self.gm.graph.erase_node(n)
        for path, module in sorted(self.modules.items()):
            _put(root, path, module)
        for n in self.gm.graph.nodes:
            if n.op == "get_attr":
                value = self.tensor(n)
                target = str(n.target)
                if value is not None and not _has(root, target):
                    _put(root, target, value)
        return root


def _a(n: fx.Node) -> Any:
    """A call's arguments, as the rules read them (fx types them as any Argument)."""
    return n.args


def _has(root: nn.Module, path: str) -> bool:
    try:
        obj: Any = root
        for part in path.split("."):
            obj = getattr(obj, part)
        return True
    except AttributeError:
        return False


def _put(root: nn.Module, path: str, value: Any) -> None:
    *parents, name = path.split(".")
    owner = root
    for part in parents:
        child = getattr(owner, part, None)
        if not isinstance(child, nn.Module):
            child = nn.Module()
            owner.add_module(part, child)
        owner = child
    if isinstance(value, nn.Module):
        owner.add_module(name, value)
    elif isinstance(value, nn.Parameter):
        owner.register_parameter(name, value)
    else:
        owner.register_buffer(name, value)


def _weights(lifter: _Lifter, n: fx.Node, *names: tuple[int, str]) -> dict[str, Any] | None:
    """The tensors at argument positions ``names`` (None where the argument is None), or None where one is
    not a tensor the model holds (computed in forward: a weight standardised on the fly)."""
    out: dict[str, Any] = {}
    for pos, name in names:
        a = _a(n)[pos] if pos < len(n.args) else None
        if a is None:
            out[name] = None
            continue
        t = lifter.tensor(a)
        if t is None:
            return None
        out[name] = t
    return out


def _arg(n: fx.Node, pos: int, default: Any) -> Any:
    return _a(n)[pos] if pos < len(n.args) else default


def _conv(lifter: _Lifter, n: fx.Node) -> tuple[nn.Module, fx.Node] | None:
    w = _weights(lifter, n, (1, "weight"), (2, "bias"))
    if w is None or w["weight"] is None or not isinstance(w["weight"], nn.Parameter):
        return None
    weight = w["weight"]
    cls = {3: nn.Conv1d, 4: nn.Conv2d, 5: nn.Conv3d}[weight.dim()]
    groups = int(_arg(n, 6, 1))
    k: Any = tuple(weight.shape[2:])
    rank = len(k)
    stride, padding, dilation = (_arg(n, i, d) for i, d in ((3, [1] * rank), (4, [0] * rank), (5, [1] * rank)))
    with torch.device("meta"):
        conv = cls(weight.shape[1] * groups, weight.shape[0], k, stride=stride, padding=padding, dilation=dilation,
                   groups=groups, bias=w["bias"] is not None)
    conv.weight = weight
    if w["bias"] is not None:
        conv.bias = w["bias"]
    return conv, _a(n)[1]


def _linear(lifter: _Lifter, n: fx.Node) -> tuple[nn.Module, fx.Node] | None:
    w = _weights(lifter, n, (1, "weight"), (2, "bias"))
    if w is None or not isinstance(w["weight"], nn.Parameter) or w["weight"].dim() != 2:
        return None
    with torch.device("meta"):
        linear = nn.Linear(w["weight"].shape[1], w["weight"].shape[0], bias=w["bias"] is not None)
    linear.weight = w["weight"]
    if w["bias"] is not None:
        linear.bias = w["bias"]
    return linear, _a(n)[1]


def _batch_norm(lifter: _Lifter, n: fx.Node) -> tuple[nn.Module, fx.Node] | None:
    w = _weights(lifter, n, (1, "weight"), (2, "bias"), (3, "running_mean"), (4, "running_var"))
    if w is None or any(w[k] is None for k in w) or bool(_arg(n, 5, False)):
        return None  # affine with running statistics, in evaluation mode: what the catalog's BatchNorm is
    x = _a(n)[0].meta.get("val") if isinstance(_a(n)[0], fx.Node) else None
    if not isinstance(x, torch.Tensor) or x.dim() not in (2, 3, 4):
        return None
    cls = nn.BatchNorm2d if x.dim() == 4 else nn.BatchNorm1d
    with torch.device("meta"):
        bn = cls(w["weight"].shape[0], eps=float(_arg(n, 7, 1e-5)), momentum=float(_arg(n, 6, 0.1)))
    bn.weight, bn.bias = w["weight"], w["bias"]
    bn.running_mean, bn.running_var = w["running_mean"], w["running_var"]
    bn.num_batches_tracked = torch.zeros((), dtype=torch.long)
    return bn, _a(n)[1]


def _layer_norm(lifter: _Lifter, n: fx.Node) -> tuple[nn.Module, fx.Node] | None:
    w = _weights(lifter, n, (2, "weight"), (3, "bias"))
    if w is None or w["weight"] is None:
        return None
    with torch.device("meta"):
        ln = nn.LayerNorm(list(_a(n)[1]), eps=float(_arg(n, 4, 1e-5)), bias=w["bias"] is not None)
    ln.weight = w["weight"]
    if w["bias"] is not None:
        ln.bias = w["bias"]
    return ln, _a(n)[2]


def _group_norm(lifter: _Lifter, n: fx.Node) -> tuple[nn.Module, fx.Node] | None:
    w = _weights(lifter, n, (2, "weight"), (3, "bias"))
    if w is None or w["weight"] is None:
        return None
    with torch.device("meta"):
        gn = nn.GroupNorm(int(_a(n)[1]), w["weight"].shape[0], eps=float(_arg(n, 4, 1e-5)),
                          affine=True)
    gn.weight = w["weight"]
    if w["bias"] is not None:
        gn.bias = w["bias"]
    else:
        gn.bias = None  # type: ignore[assignment]
    return gn, _a(n)[2]


_LIFTS: dict[Any, Callable[[_Lifter, fx.Node], tuple[nn.Module, fx.Node] | None]] = {
    A.conv1d.default: _conv, A.conv2d.default: _conv, A.conv3d.default: _conv, A.linear.default: _linear,
    A.batch_norm.default: _batch_norm, A.layer_norm.default: _layer_norm, A.group_norm.default: _group_norm,
}
