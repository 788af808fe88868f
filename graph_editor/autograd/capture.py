"""The autograd graph of one training step, node by node, attributed to the graph nodes that made it.

``capture_autograd(graph or module, batch, precision, device_kind)`` runs one forward and backward
(cross-entropy on the logits) and returns every autograd node PyTorch built: its name (e.g.
``ConvolutionBackward0``), where its gradients flow, the graph node whose forward created it, the
tensors it saved for backward and, for ``AccumulateGrad``, the parameter it feeds.

How, and why this way:
- The step runs as fake CPU tensors (:mod:`.fake`): a real CPU step's graph and bytes, no memory.
  Where fake tensors refuse an op the capture falls back to ``meta`` and says so (``device`` of the
  result); meta gets attention and autocast wrong, so it is never the first choice.
- Device kind 'cuda' runs the step as fake CUDA tensors, so the graph is the one CUDA builds: cuDNN
  batch norm (``CudnnBatchNormBackward0``), fused dropout saving a 1-byte mask
  (``NativeDropoutBackward0``; the CPU multiplies by a 4-byte float mask). With a CUDA device that
  is the whole step. Without one (a CUDA build of PyTorch on a machine with no GPU) the forward still
  runs as fake CUDA tensors, but the backward cannot (the autograd engine asks the device for its
  context), so it is not run: the graph and saved tensors are complete after the forward anyway.
  What needs the device falls back to fake CPU tensors and says so in ``note``: bf16/fp16 (autocast
  turns itself off without a CUDA device). Attention also needs the device to pick a fused kernel
  (flash or memory-efficient, which save far less); without one it takes the unfused path, and the
  note says the attention layers' bytes are those of that path. A CPU-only build of PyTorch captures
  'cuda' as the CPU, and says so.
- Attribution: a forward hook on each top-level submodule (named by its graph node id) claims every
  autograd node reachable from the module's outputs that no earlier module claimed. The loss's
  nodes go to the pseudo node :data:`LOSS`. This leaves nothing unowned on every template.
- Saved tensors: ``saved_tensors_hooks`` sees each tensor saved for backward; a node's ``_saved_*``
  attributes name them. Bytes are counted once per storage (keyed by the storage object, never by
  its address, which is reused after a free) and given to the first node, in creation order, that
  saved it. Parameters and the input batch are not counted: they live anyway.
- Results are cached by (graph content, batch, precision, device kind, channels_last).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..building.data_dependent import data_dependent_cause, describe, node_label, tracking_nodes
from ..building.fake import empty_parameters, fake_batch, fake_cpu
from ..building.fx import build_module
from ..model import Graph

LOSS = "loss"  # the pseudo graph node owning the loss's autograd nodes
PRECISIONS = ("fp32", "bf16", "fp16")
DEVICE_KINDS = ("cpu", "cuda")

__all__ = ["DEVICE_KINDS", "LOSS", "PRECISIONS", "AutogradCapture", "AutogradNode", "CaptureError",
           "OwnerSummary", "SavedTensor", "capture_autograd", "graph_content_hash"]


class CaptureError(ValueError):
    """The capture was asked for something it cannot do (a bad batch, precision or device kind), a
    node needs the data's values (``.item()``), or the training step itself fails on a node (batch
    norm at batch 1); ``node``: the graph node it is about, if any."""

    def __init__(self, message: str, node: str | None = None) -> None:
        super().__init__(message)
        self.node = node


@dataclass(frozen=True)
class SavedTensor:
    """One tensor an autograd node saved for backward. ``bytes`` is 0 where the storage was already
    counted for an earlier node (or is a parameter or the input)."""

    name: str  # the attribute without its prefix, e.g. 'self', 'weight', 'result'
    shape: tuple[int, ...]
    dtype: str
    bytes: int
    shared: bool = False  # the storage is counted elsewhere (another node, a parameter, the input)


@dataclass
class AutogradNode:
    index: int
    name: str  # e.g. 'ConvolutionBackward0', 'AccumulateGrad'
    owner: str  # the graph node id whose forward created it, or LOSS
    next: list[int] = field(default_factory=list)  # where its gradients flow (indices)
    saved: list[SavedTensor] = field(default_factory=list)
    param: str | None = None  # for AccumulateGrad: the parameter it accumulates into, e.g. 'conv1.weight'

    @property
    def saved_bytes(self) -> int:
        return sum(s.bytes for s in self.saved)


@dataclass(frozen=True)
class OwnerSummary:
    """One graph node's part of the backward graph."""

    owner: str
    nodes: int
    names: dict[str, int]  # autograd node name -> count
    saved_bytes: int
    params: tuple[str, ...]
    grads_to: tuple[str, ...]  # the graph nodes its gradients flow to (input side)


@dataclass
class AutogradCapture:
    """The backward graph of one training step; ``nodes`` are in backward order (from the loss)."""

    nodes: list[AutogradNode]
    owners: list[str]  # graph node ids in forward (network) order, then LOSS
    batch: int
    precision: str
    device_kind: str
    device: str  # what the step actually ran on: 'fake-cpu', 'fake-cuda' or 'meta'
    note: str = ""  # why a fallback was taken

    @property
    def saved_bytes(self) -> int:
        return sum(n.saved_bytes for n in self.nodes)

    @property
    def edges(self) -> list[tuple[int, int]]:
        """(from, to) pairs in the direction gradients flow."""
        return [(n.index, j) for n in self.nodes for j in n.next]

    def by_owner(self) -> dict[str, list[AutogradNode]]:
        out: dict[str, list[AutogradNode]] = {o: [] for o in self.owners}
        for n in self.nodes:
            out.setdefault(n.owner, []).append(n)
        return out

    def summaries(self) -> list[OwnerSummary]:
        """Per graph node, in network order: its autograd nodes, saved bytes, where its gradients flow."""
        result = []
        for owner, nodes in self.by_owner().items():
            names: dict[str, int] = {}
            for n in nodes:
                names[n.name] = names.get(n.name, 0) + 1
            targets = []
            for n in nodes:
                for j in n.next:
                    other = self.nodes[j].owner
                    if other != owner and other not in targets:
                        targets.append(other)
            result.append(OwnerSummary(owner, len(nodes), names, sum(n.saved_bytes for n in nodes),
                                       tuple(n.param for n in nodes if n.param), tuple(targets)))
        return result

    def to_dict(self) -> dict[str, Any]:
        return {
            "batch": self.batch, "precision": self.precision, "device_kind": self.device_kind,
            "device": self.device, "note": self.note, "saved_bytes": self.saved_bytes,
            "owners": list(self.owners),
            "nodes": [{"index": n.index, "name": n.name, "owner": n.owner, "next": n.next, "param": n.param,
                       "saved_bytes": n.saved_bytes,
                       "saved": [{"name": s.name, "shape": list(s.shape), "dtype": s.dtype, "bytes": s.bytes,
                                  "shared": s.shared} for s in n.saved]}
                      for n in self.nodes],
            "summary": [{"owner": s.owner, "nodes": s.nodes, "names": s.names, "saved_bytes": s.saved_bytes,
                         "params": list(s.params), "grads_to": list(s.grads_to)} for s in self.summaries()],
        }


def graph_content_hash(graph: Graph) -> str:
    """What the built network depends on: layers, parameters, wiring, input and classes (not positions,
    labels or groups, so moving a node keeps its cached capture)."""
    content = {
        "input": [list(graph.input_spec.shape), graph.input_spec.dtype], "classes": graph.num_classes,
        "nodes": sorted([n.id, n.type, {k: list(v) if isinstance(v, tuple) else v for k, v in n.params.items()}]
                        for n in graph),
        "edges": sorted([e.src, e.src_port, e.dst, e.dst_port] for e in graph.edges),
    }
    return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()


_CACHE: dict[tuple[Any, ...], AutogradCapture] = {}
_CACHE_SIZE = 16


def capture_autograd(source: Graph | nn.Module, batch: int = 1, precision: str = "fp32", device_kind: str = "cpu",
                     *, input_shape: tuple[int, ...] | None = None, channels_last: bool = False,
                     use_cache: bool = True) -> AutogradCapture:
    """Capture the backward graph of one training step of ``source`` at ``batch``.

    ``source`` is a graph (built on ``meta``) or an ``nn.Module`` whose top-level children are the
    owners (then ``input_shape``, per sample, is required; the module is left as it was).
    ``precision``: 'fp32', 'bf16' or 'fp16' (autocast on the forward). ``device_kind``: 'cpu' or
    'cuda' (fake CUDA tensors, falling back to fake CPU where they refuse).
    """
    if batch < 1:
        raise CaptureError(f"batch must be at least 1, got {batch}")
    if precision not in PRECISIONS:
        raise CaptureError(f"precision '{precision}' is not one of {', '.join(PRECISIONS)}")
    if device_kind not in DEVICE_KINDS:
        raise CaptureError(f"device kind '{device_kind}' is not one of {', '.join(DEVICE_KINDS)}")
    module: nn.Module
    if isinstance(source, Graph):
        key = (graph_content_hash(source), batch, precision, device_kind, channels_last)
        if use_cache and key in _CACHE:
            return _CACHE[key]
        module = build_module(source, batch=batch, device="meta")
        shape, dtype = tuple(source.input_spec.shape), getattr(torch, source.input_spec.dtype)
    else:
        if input_shape is None:
            raise CaptureError("capturing an nn.Module needs its per-sample input_shape, e.g. (3, 32, 32)")
        key, module, shape, dtype = None, source, tuple(input_shape), torch.float32
    with tracking_nodes(module) as running:
        try:
            result = _capture_with_fallback(module, shape, dtype, batch, precision, device_kind, channels_last)
        except _NeedsData as exc:  # no fallback computes it: say which node and why
            graph = source if isinstance(source, Graph) else None
            label = node_label(graph, running[0], module)
            raise CaptureError(describe(exc.error, label, "the backward graph cannot be captured") or str(exc.error),
                               running[0]) from None
        except CaptureError:
            raise
        except Exception as exc:  # the step itself fails (batch norm at batch 1, a shape the graph refuses)
            graph = source if isinstance(source, Graph) else None
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            hint = ("; batch norm in training mode needs a batch of 2 or more"
                    if "more than 1 value per channel" in first else "")
            raise CaptureError(f"{node_label(graph, running[0], module)} fails in a training step at batch {batch}: "
                               f"{first}{hint}", running[0]) from None
    if key is not None:
        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = result
    return result


def _capture_with_fallback(module: nn.Module, shape: tuple[int, ...], dtype: torch.dtype, batch: int,
                           precision: str, device_kind: str, channels_last: bool) -> AutogradCapture:
    notes = []
    devices = ["cpu"]
    if device_kind == "cuda":
        if not torch.backends.cuda.is_built():  # fake CUDA tensors abort a CPU-only build in a kernel's guard
            notes.append("this PyTorch has no CUDA support: captured as on the CPU")
        elif torch.cuda.is_available() or precision == "fp32":
            devices.insert(0, "cuda")
        else:
            notes.append(f"{precision} autocast needs a CUDA device and there is none here: captured as on the CPU")
    for dev in devices:
        try:
            with fake_cpu(module, channels_last=channels_last, device=dev):
                x, y = fake_batch(shape, batch, dtype=dtype, device=dev, channels_last=channels_last)
                no_device = dev == "cuda" and not torch.cuda.is_available()
                captured = _capture(module, x, y, batch, precision, device_kind, f"fake-{dev}", "; ".join(notes),
                                    backward=not no_device)
            if no_device:
                captured.note = "; ".join([*notes, *_no_device_notes(captured)])
            return captured
        except Exception as exc:  # an op fake tensors refuse: say so and try the next way
            if data_dependent_cause(exc) is not None:
                raise _NeedsData(exc) from exc  # meta cannot compute a value either
            notes.append(f"fake {dev} tensors refused the step ({type(exc).__name__}: {str(exc)[:160]})")
    with empty_parameters(module, "meta", channels_last=channels_last):
        x, y = fake_batch(shape, batch, dtype=dtype, device="meta", channels_last=channels_last)
        notes.append("captured on meta: attention and autocast may differ from the device")
        try:
            return _capture(module, x, y, batch, precision, device_kind, "meta", "; ".join(notes))
        except Exception as exc:
            if data_dependent_cause(exc) is not None:
                raise _NeedsData(exc) from exc
            raise


class _NeedsData(Exception):
    """A step failed on an op that needs the data's values (:mod:`.data_dependent`)."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


def _no_device_notes(captured: AutogradCapture) -> list[str]:
    notes = ["no CUDA device here: the graph CUDA builds in the forward, its backward not run"]
    if any(n.name == "SafeSoftmaxBackward0" for n in captured.nodes):  # the unfused attention's softmax
        notes.append("attention took the unfused path (a GPU picks a fused kernel that saves less)")
    return notes


def _capture(module: nn.Module, x: torch.Tensor, y: torch.Tensor, batch: int, precision: str,
             device_kind: str, device: str, note: str, backward: bool = True) -> AutogradCapture:
    owner_of: dict[Any, str] = {}  # autograd Node -> owner (Node objects hash by identity)
    order: list[str] = []

    def claim(owner: str, outputs: Any) -> None:
        stack: list[torch.autograd.graph.Node | None] = [t.grad_fn for t in tensors_in(outputs)
                                                         if t.grad_fn is not None]
        while stack:
            fn = stack.pop()
            if fn is None or fn in owner_of:
                continue
            owner_of[fn] = owner
            stack.extend(nxt for nxt, _ in fn.next_functions)

    def post_hook(name: str):
        def hook(_mod: nn.Module, _args: Any, output: Any) -> None:
            if name not in order:
                order.append(name)
            claim(name, output)
        return hook

    handles = [child.register_forward_hook(post_hook(name)) for name, child in module.named_children()]
    packed: list[torch.Tensor] = []

    def pack(t: torch.Tensor) -> int:
        packed.append(t)
        return len(packed) - 1

    try:
        autocast = _autocast(device.split("-")[-1], precision)
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda i: packed[i]), autocast:
            logits = module(x)
            loss = F.cross_entropy(logits, y)
        claim(LOSS, loss)
        order.append(LOSS)
        skip = [s for s in (_storage(p) for p in [*module.parameters(), *module.buffers(), x]) if s is not None]
        param_names = {id(p): n for n, p in module.named_parameters()}
        nodes = _walk(loss.grad_fn, owner_of, skip, param_names)
        if backward:
            loss.backward()  # the capture is of a step that runs; an op failing in backward fails here
    finally:
        for h in handles:
            h.remove()
        for p in module.parameters():
            p.grad = None
    return AutogradCapture(nodes, order, batch, precision, device_kind, device, note)


def _walk(root: Any, owner_of: dict[Any, str], skip: list[Any],
          param_names: dict[int, str]) -> list[AutogradNode]:
    """The nodes reachable from ``root`` in topological (backward) order, with their saved tensors."""
    indegree: dict[Any, int] = {root: 0}
    stack = [root]
    while stack:
        fn = stack.pop()
        for nxt, _ in fn.next_functions:
            if nxt is None:
                continue
            if nxt not in indegree:
                indegree[nxt] = 0
                stack.append(nxt)
            indegree[nxt] += 1
    ready, ordered = [root], []
    while ready:
        fn = ready.pop()
        ordered.append(fn)
        for nxt, _ in reversed(fn.next_functions):
            if nxt is not None:
                indegree[nxt] -= 1
                if indegree[nxt] == 0:
                    ready.append(nxt)
    index = {fn: i for i, fn in enumerate(ordered)}
    nodes = [AutogradNode(i, fn.name().removeprefix("torch::autograd::"), owner_of.get(fn, LOSS),
                          [index[n] for n, _ in fn.next_functions if n is not None])
             for i, fn in enumerate(ordered)]
    # Bytes go to the first node, in creation (forward) order, that saved a storage.
    seen = {id(s): s for s in skip}  # by object, kept alive here, so no id is reused meanwhile
    for fn in sorted(ordered, key=_sequence_nr):
        node = nodes[index[fn]]
        variable = getattr(fn, "variable", None)
        if variable is not None:
            node.param = param_names.get(id(variable))
        for attr, t in _saved(fn):
            storage = _storage(t)
            fresh = storage is not None and id(storage) not in seen
            if fresh:
                seen[id(storage)] = storage
            node.saved.append(SavedTensor(attr, tuple(t.shape), str(t.dtype).removeprefix("torch."),
                                          storage.nbytes() if fresh else 0, shared=not fresh))
    return nodes


def _sequence_nr(fn: Any) -> int:
    return fn._sequence_nr() if hasattr(fn, "_sequence_nr") else 0


_SAVED_ATTRS: dict[type, list[str]] = {}


def _saved(fn: Any) -> Iterator[tuple[str, torch.Tensor]]:
    attrs = _SAVED_ATTRS.get(type(fn))
    if attrs is None:  # dir() is slow; a node type's attributes never change
        attrs = _SAVED_ATTRS[type(fn)] = [a for a in dir(fn) if a.startswith("_saved_")]
    for attr in attrs:
        try:
            value = getattr(fn, attr)
        except RuntimeError:  # freed or undefined saved variable
            continue
        name = attr.removeprefix("_saved_")
        if isinstance(value, torch.Tensor):
            yield name, value
        elif isinstance(value, (tuple, list)):
            for i, v in enumerate(value):
                if isinstance(v, torch.Tensor):
                    yield f"{name}[{i}]", v


def _storage(t: torch.Tensor) -> Any:
    try:
        return t.untyped_storage()
    except (RuntimeError, NotImplementedError):  # sparse or otherwise storage-less tensors
        return None


def tensors_in(value: Any) -> Iterator[torch.Tensor]:
    """Every tensor in a module's output: a tensor, or tuples, lists and dicts of them, nested."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from tensors_in(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from tensors_in(v)


def _autocast(device_type: str, precision: str) -> Any:
    if precision == "fp32" or device_type == "meta":
        return torch.autocast("cpu", enabled=False)
    return torch.autocast(device_type, dtype=torch.bfloat16 if precision == "bf16" else torch.float16)
