"""Predict the memory of a training step before training: ``predict_memory`` and ``largest_batch``.

The trainer's own step (:func:`trainer.loop.make_train_step`, with the optimizer of
:func:`trainer.optim.make_optimizer`) runs for three steps on fake CPU tensors
(``FakeTensorMode``: no real memory, the real device's autograd graph and autocast), under a
dispatch mode that records every new storage an op returns and its free (``weakref.finalize``).
Steps 2 and 3 are read: by then the optimizer state exists and the loop's order is what it will be
for the rest of the run. Each storage is classed as weights, gradients, optimizer state,
activations saved for backward, the input batch, or transient, and attributed to the graph node
and phase (forward, loss, backward, optimizer) that made it.

It lives in ``trainer`` because it runs the trainer's step (``graph_editor`` never imports the
trainer). Cost: about a second for resnet18 at batch 32 after a few seconds' first call.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.weak import WeakIdKeyDictionary

from graph_editor.build import build_module
from graph_editor.build.autograd import tensors_in
from graph_editor.build.data_dependent import describe, node_label
from graph_editor.build.fake import fake_batch, fake_cpu
from graph_editor.model import Graph, GraphError

from .checkpointing import SegmentError, checkpointed_module
from .loop import make_train_step
from .optim import make_optimizer
from .spec import OPTIMIZERS, OptimSpec

PARTS = ("data", "weights", "gradients", "optimizer", "activations", "batch", "transient")
PHASES = ("setup", "forward", "loss", "backward", "optimizer")
LOSS_NODE = "(loss)"          # the pseudo node of the loss and what follows the model's output
CUDA_BLOCK = 512              # the CUDA caching allocator rounds every block up to this
STEPS, READ_FROM = 3, 2       # steps run, first step read


class MemoryPredictionError(ValueError):
    """The prediction cannot run (a bad argument, the graph does not build, or a node needs the
    data's values); ``node``: the graph node it is about, where there is one."""

    def __init__(self, message: str, node: str | None = None) -> None:
        super().__init__(message)
        self.node = node


class DataDependentStep(MemoryPredictionError):
    """A node needs the data's values (``.item()``, a shape from the values): fake tensors have none,
    so the step's memory cannot be predicted; a real device may still run it."""


class Cancelled(Exception):
    """A search was asked to stop (its ``stop()`` returned True) between two predictions."""


@dataclass
class MemoryPrediction:
    """The peak of a training step and what holds it.

    ``parts``: live bytes at the peak by kind (:data:`PARTS`); ``peak_phase``/``peak_node``: where
    the peak is reached; ``phase_peaks``: the parts at each phase's own high point; ``nodes``: per graph node, the bytes it holds at the peak (``at_peak``),
    its weights and the activations it saves for backward (``saved``).
    """

    batch: int
    optimizer: str
    precision: str
    channels_last: bool
    device: str
    peak_bytes: int
    parts: dict[str, int]
    peak_phase: str
    peak_node: str
    nodes: dict[str, dict[str, int]]
    phase_peaks: dict[str, dict[str, int]] = field(default_factory=dict)   # each phase's high point, by part
    checkpoint: list[str] = field(default_factory=list)

    def top_nodes(self, n: int = 3) -> list[tuple[str, int]]:
        """The graph nodes holding most memory at the peak (weights and optimizer state aside)."""
        ranked = sorted(((k, v["at_peak"]) for k, v in self.nodes.items() if v["at_peak"] > 0),
                        key=lambda kv: -kv[1])
        return ranked[:n]

    def to_dict(self) -> dict[str, Any]:
        return {"batch": self.batch, "optimizer": self.optimizer, "precision": self.precision,
                "channels_last": self.channels_last, "device": self.device, "peak_bytes": self.peak_bytes,
                "parts": dict(self.parts), "peak_phase": self.peak_phase, "peak_node": self.peak_node,
                "phase_peaks": {k: dict(v) for k, v in self.phase_peaks.items()},
                "checkpoint": list(self.checkpoint), "nodes": {k: dict(v) for k, v in self.nodes.items()}}


# ------------------------------------------------------------------------- the tracker
@dataclass
class _Block:
    nbytes: int
    kind: str
    node: str
    phase: str


class _Tracker(TorchDispatchMode):
    """Records each new storage an op returns and, through ``weakref.finalize``, its free.

    ``log`` holds (block key, +-bytes) while ``recording``; ``where`` is the (phase, node) the
    next allocation is attributed to (the backward's node comes from the running autograd node).
    """

    def __init__(self, round_to: int = 1) -> None:
        super().__init__()
        self.keys = WeakIdKeyDictionary()
        self.blocks: dict[int, _Block] = {}
        self.alive: set[int] = set()
        self.live = 0
        self.round_to = round_to
        self.recording = False
        self.log: list[tuple[int, int]] = []
        self.phase, self.node = "setup", ""
        self.kind = "transient"      # the kind new storages get (weights while materialising, batch ...)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        out = func(*args, **(kwargs or {}))
        for t in tensors_in(out):
            self.track(t)
        scratch = _conv_scratch(func, args, out)
        if scratch:
            self.spike(scratch)
        return out

    def spike(self, nbytes: int) -> None:
        """A kernel's workspace: allocated and freed inside one op, invisible to fake tensors."""
        key = len(self.blocks)
        self.blocks[key] = _Block(nbytes, "transient", self.node, self.phase)
        if self.recording:
            self.log += [(key, nbytes), (key, -nbytes)]

    def track(self, t: torch.Tensor) -> int | None:
        st = t.untyped_storage()
        key = self.keys.get(st)
        if key is not None:
            return key
        nbytes = st.nbytes()
        if self.round_to > 1:
            nbytes = -(-nbytes // self.round_to) * self.round_to
        key = len(self.blocks)
        running = torch._C._current_autograd_node()      # set while the engine runs a backward node
        if running is not None:
            self.phase = "backward"
        elif self.phase == "backward":
            self.phase, self.node = "loss", LOSS_NODE     # after the backward, before the optimizer step
        phase, node = self.phase, self.node
        if running is not None:
            node = running.metadata.get("studio_node", LOSS_NODE)
        self.blocks[key] = _Block(nbytes, self.kind, node, phase)
        self.keys[st] = key
        self.live += nbytes
        self.alive.add(key)
        if self.recording:
            self.log.append((key, nbytes))
        weakref.finalize(st, self._free, key)
        return key

    def _free(self, key: int) -> None:
        nbytes = self.blocks[key].nbytes
        self.live -= nbytes
        self.alive.discard(key)
        if self.recording:
            self.log.append((key, -nbytes))

    def mark(self, t: torch.Tensor | None, kind: str, *, only_from: str | None = None) -> None:
        """Class the storage of ``t`` as ``kind`` (when it is still of kind ``only_from``, if given)."""
        if t is None:
            return
        key = self.keys.get(t.untyped_storage())
        if key is None:
            key = self.track(t)
        block = self.blocks[key]
        if only_from is None or block.kind == only_from:
            block.kind = kind


def _conv_scratch(func: Any, args: tuple, out: Any) -> int:
    """The column buffer (im2col) of PyTorch's slow CPU convolution, which runs 2-D convolutions in
    a dtype oneDNN does not take on this CPU (bf16 without AVX512-BF16/AMX, say): one buffer of
    batch x in_channels/groups x kh x kw x output pixels, in forward and again in backward."""
    if func is torch.ops.aten.convolution.default:
        x, w, transposed, out_hw = args[0], args[1], args[6], out.shape[2:]
    elif func is torch.ops.aten.convolution_backward.default:
        x, w, transposed, out_hw = args[1], args[2], args[7], args[0].shape[2:]
    else:
        return 0
    if x.device.type != "cpu" or w.dim() != 4 or transposed or not _slow_cpu_conv(x.dtype):
        return 0
    return x.shape[0] * w.shape[1] * w.shape[2] * w.shape[3] * out_hw[0] * out_hw[1] * x.element_size()


def _slow_cpu_conv(dtype: torch.dtype) -> bool:
    if dtype == torch.bfloat16:
        return not torch.ops.mkldnn._is_mkldnn_bf16_supported()
    if dtype == torch.float16:
        return not torch.ops.mkldnn._is_mkldnn_fp16_supported()
    return False


# ------------------------------------------------------------------------- attribution hooks
def _stamp(outputs: Any, owner: str) -> None:
    """Give ``owner`` every autograd node reachable from ``outputs`` that no earlier module owns."""
    todo = [t.grad_fn for t in tensors_in(outputs) if t.grad_fn is not None]
    while todo:
        fn = todo.pop()
        md = fn.metadata
        if "studio_node" in md:
            continue
        md["studio_node"] = owner
        todo.extend(nxt for nxt, _ in fn.next_functions if nxt is not None)


@contextmanager
def _attributed(model: nn.Module, opt: torch.optim.Optimizer, tracker: _Tracker) -> Iterator[None]:
    """Forward hooks on each graph node's module set the phase and node; optimizer hooks mark the
    gradients (as the step starts) and the optimizer's state (as it ends)."""
    handles = []

    def pre(name: str) -> Callable:
        def hook(_m: nn.Module, _args: Any) -> None:
            tracker.phase, tracker.node = "forward", name
        return hook

    def post(name: str) -> Callable:
        def hook(_m: nn.Module, _args: Any, out: Any) -> None:
            _stamp(out, name)
            tracker.phase, tracker.node = "loss", LOSS_NODE
        return hook

    for name, child in model.named_children():
        handles.append(child.register_forward_pre_hook(pre(name)))
        handles.append(child.register_forward_hook(post(name)))

    def opt_pre(*_a: Any) -> None:
        for p in _params(opt):
            tracker.mark(p.grad, "gradients")
        tracker.phase, tracker.node = "optimizer", "(optimizer)"

    def opt_post(*_a: Any) -> None:
        for state in opt.state.values():
            for v in state.values():
                if isinstance(v, torch.Tensor):
                    tracker.mark(v, "optimizer")
        tracker.phase, tracker.node = "setup", ""

    handles.append(opt.register_step_pre_hook(opt_pre))
    handles.append(opt.register_step_post_hook(opt_post))

    def pack(t: torch.Tensor) -> torch.Tensor:
        tracker.mark(t, "activations", only_from="transient")
        return t

    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            yield
    finally:
        for h in handles:
            h.remove()


def _params(opt: torch.optim.Optimizer) -> Iterator[torch.Tensor]:
    for group in opt.param_groups:
        yield from group["params"]


# ------------------------------------------------------------------------- prediction
def predict_memory(graph: Graph, batch: int, optimizer: str | OptimSpec = "adamw", precision: str = "fp32",
                   channels_last: bool = False, device: str = "cpu", *,
                   checkpoint: Sequence[str] = (), resident: int = 0) -> MemoryPrediction:
    """The peak memory of a training step of ``graph`` at ``batch`` and what holds it.

    ``optimizer``: a name (:data:`trainer.spec.OPTIMIZERS`) or an :class:`OptimSpec`; ``precision``:
    fp32 or bf16 (autocast, as the loop does); ``device``: "cpu" or "cuda" (CUDA: every block rounded
    up to the caching allocator's 512 bytes). ``checkpoint``: segments run under activation
    checkpointing (group ids or 'first..last' node ranges, :mod:`trainer.checkpointing`).
    ``resident``: bytes the run keeps on the device outside the step, the dataset when the loaders
    hold it there (part "data", live at every moment; :func:`trainer.memory_doctor.resident_data_bytes`).
    No real memory is used.
    """
    spec = _check_args(batch, optimizer, precision, device)
    if isinstance(resident, bool) or not isinstance(resident, int) or resident < 0:
        raise MemoryPredictionError(f"resident: must be a byte count >= 0, got {resident!r}")
    try:
        model = checkpointed_module(build_module(graph, device="meta"), graph, list(checkpoint), "checkpoint")
    except (GraphError, SegmentError) as exc:  # both name the node or entry
        raise MemoryPredictionError(f"model.graph: {exc}" if isinstance(exc, GraphError) else str(exc)) from None
    tracker = _Tracker(CUDA_BLOCK if device.startswith("cuda") else 1)
    try:
        log, start = _run_steps(graph, model, tracker, spec, batch, precision, channels_last)
    except Exception as exc:
        node = tracker.node if tracker.node in graph.nodes else None
        message = describe(exc, node_label(graph, node), "the training step's memory cannot be predicted")
        if message is None:
            raise
        raise DataDependentStep(message, node) from None
    pred = _read(tracker, log, start, batch=batch, optimizer=spec.name, precision=precision,
                 channels_last=channels_last, device=device, model=model, checkpoint=list(checkpoint))
    if resident:      # lives through the whole step: the peak stays where it is, higher by it
        pred.parts["data"] = resident
        pred.peak_bytes += resident
        for parts in pred.phase_peaks.values():
            parts["data"] = resident
    return pred


def _run_steps(graph: Graph, model: nn.Module, tracker: _Tracker, spec: OptimSpec, batch: int, precision: str,
               channels_last: bool) -> tuple[list[tuple[int, int]], set[int]]:
    """The trainer's step :data:`STEPS` times under ``tracker``: its log from step :data:`READ_FROM`
    on and the blocks alive as that step started."""
    cpu, cl = torch.device("cpu"), channels_last
    with ExitStack() as stack:
        stack.enter_context(fake_cpu(model, channels_last=cl))
        stack.enter_context(tracker)
        for t in (*model.parameters(), *model.buffers()):
            tracker.mark(t, "weights")
        opt = make_optimizer(model, spec)
        step_fn, _ = make_train_step(model, opt, device=cpu, precision=precision, label_smoothing=0.0)
        stack.enter_context(_attributed(model, opt, tracker))
        x = y = None
        for step in range(1, STEPS + 1):
            if step == READ_FROM:
                tracker.recording, tracker.log = True, []
                start = set(tracker.alive)
            tracker.phase, tracker.node, tracker.kind = "setup", "(batch)", "batch"
            x, y = fake_batch(graph, batch, channels_last=cl)   # the next batch, while the last still lives
            tracker.kind = "transient"
            loss, pred = step_fn(x, y)
            del loss, pred
        tracker.recording = False
        log = tracker.log
        del x, y, step_fn, opt
    return log, start


def _check_args(batch: int, optimizer: str | OptimSpec, precision: str, device: str) -> OptimSpec:
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise MemoryPredictionError(f"batch: must be a positive integer, got {batch!r}")
    spec = optimizer if isinstance(optimizer, OptimSpec) else OptimSpec(name=str(optimizer))
    if spec.name not in OPTIMIZERS:
        raise MemoryPredictionError(f"optimizer: unknown optimizer '{spec.name}' (choose {', '.join(OPTIMIZERS)})")
    if precision not in ("fp32", "bf16"):
        raise MemoryPredictionError(f"precision: the prediction knows fp32 and bf16, got '{precision}'")
    if not (device in ("cpu", "cuda") or device.startswith("cuda:")):
        raise MemoryPredictionError(f"device: choose cpu or cuda, got '{device}'")
    return spec


def _read(tracker: _Tracker, log: list[tuple[int, int]], start: set[int], *, model: nn.Module,
          **info: Any) -> MemoryPrediction:
    """Replay the recorded steps: the peak, its live blocks by kind and node, each phase's high point."""
    live = sum(tracker.blocks[k].nbytes for k in start)
    peak, peak_at = live, -1
    phase_at: dict[str, tuple[int, int]] = {}     # phase -> (highest live bytes, log index)
    for i, (key, delta) in enumerate(log):
        live += delta
        if delta > 0:
            ph = tracker.blocks[key].phase
            if live > phase_at.get(ph, (-1, 0))[0]:
                phase_at[ph] = (live, i)
        if live > peak:
            peak, peak_at = live, i
    alive = _alive_at(start, log, peak_at)
    parts = _parts(tracker, alive)
    nodes: dict[str, dict[str, int]] = {}
    for key in alive:
        b = tracker.blocks[key]
        if b.kind not in ("weights", "optimizer", "gradients"):
            _node(nodes, b.node)["at_peak"] += b.nbytes
    recorded = STEPS - READ_FROM + 1
    for key, delta in log:
        b = tracker.blocks[key]
        if delta > 0 and b.kind == "activations" and b.phase == "forward":
            _node(nodes, b.node)["saved"] += b.nbytes
    for v in nodes.values():
        v["saved"] //= recorded
    for name, child in model.named_children():
        _node(nodes, name)["weights"] += sum(p.numel() * p.element_size() for p in child.parameters())
    last = tracker.blocks[log[peak_at][0]] if peak_at >= 0 else _Block(0, "", "", "setup")
    phase_peaks = {ph: _parts(tracker, _alive_at(start, log, i)) for ph, (_, i) in phase_at.items()}
    return MemoryPrediction(peak_bytes=sum(parts.values()), parts=parts, peak_phase=last.phase,
                            peak_node=last.node, nodes=nodes, phase_peaks=phase_peaks, **info)


def _alive_at(start: set[int], log: list[tuple[int, int]], index: int) -> set[int]:
    alive = set(start)
    for key, delta in log[:index + 1]:
        if delta > 0:
            alive.add(key)
        else:
            alive.discard(key)
    return alive


def _parts(tracker: _Tracker, keys: set[int]) -> dict[str, int]:
    parts = dict.fromkeys(PARTS, 0)
    for key in keys:
        b = tracker.blocks[key]
        parts[b.kind] += b.nbytes
    return parts


def _node(nodes: dict[str, dict[str, int]], name: str) -> dict[str, int]:
    return nodes.setdefault(name, {"at_peak": 0, "saved": 0, "weights": 0})


# ------------------------------------------------------------------------- largest batch
CUDA_CONTEXT = 512 * 2 ** 20   # the CUDA context and cuBLAS/cuDNN handles, outside the allocator
CUDA_SLACK = 0.05              # the caching allocator's fragmentation, as a fraction of the rest


def usable_bytes(total: int, device: str) -> int:
    """What a training step may use of a device with ``total`` bytes: on CUDA less the context
    and the allocator's slack; on the CPU all of it (the caller passes what is free)."""
    if device.startswith("cuda"):
        return max(int((total - CUDA_CONTEXT) * (1 - CUDA_SLACK)), 0)
    return total


def largest_batch(graph: Graph, budget: int, *, optimizer: str | OptimSpec = "adamw", precision: str = "fp32",
                  channels_last: bool = False, device: str = "cpu", upper: int = 1 << 16,
                  checkpoint: Sequence[str] = (), stop: Callable[[], bool] | None = None, resident: int = 0,
                  ) -> tuple[int, MemoryPrediction | None]:
    """The largest batch whose predicted peak fits ``budget`` bytes, and its prediction (0 and None
    when not even batch 1 fits). Fits ``peak = c0 + c1*b`` from two predictions, then confirms or
    steps down with real predictions (attention makes the peak slightly more than linear). ``stop``
    is asked before each prediction; True raises :class:`Cancelled`."""
    kw = dict(optimizer=optimizer, precision=precision, channels_last=channels_last, device=device,
              checkpoint=checkpoint, resident=resident)
    if budget <= 0:
        raise MemoryPredictionError(f"budget: must be positive, got {budget}")
    p1 = predict_memory(graph, 1, **kw)
    if p1.peak_bytes > budget:
        return 0, None
    p8 = predict_memory(graph, 8, **kw)
    slope = max((p8.peak_bytes - p1.peak_bytes) / 7, 1.0)
    guess = max(1, min(upper, int((budget - p1.peak_bytes) / slope) + 1))
    known = {1: p1, 8: p8}
    good, bad = 1, upper + 1
    for _ in range(12):
        if guess in known:
            pred = known[guess]
        else:
            if stop is not None and stop():
                raise Cancelled
            pred = known[guess] = predict_memory(graph, guess, **kw)
        if pred.peak_bytes <= budget:
            good = max(good, guess)
        else:
            bad = min(bad, guess)
        if bad - good <= 1:
            break
        # step within the bracket: linear interpolation of what is known, kept strictly inside
        lo, hi = known[good].peak_bytes, known[bad].peak_bytes if bad in known else None
        if hi is None:
            guess = min(upper, max(good + 1, int(good + (budget - lo) / slope)))
            if guess == good:
                break
        else:
            frac = (budget - lo) / max(hi - lo, 1)
            guess = min(bad - 1, max(good + 1, good + int(math.floor(frac * (bad - good)))))
    return good, known[good]
