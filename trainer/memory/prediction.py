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
import os
import re
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from graph_editor.building import build_module
from graph_editor.building.data_dependent import describe, node_label
from graph_editor.building.fake import fake_batch, fake_cpu
from graph_editor.model import Graph, GraphError
from graph_editor.model.units import MiB

from ..finetune import freeze
from ..loop import make_train_step
from ..optim import make_optimizer
from ..spec import OPTIMIZERS, ModelSpec, OptimSpec, SpecError
from .recomputation import SegmentError, checkpointed_module
from .tracker import Block, StorageTracker, attributed

PARTS = ("data", "weights", "gradients", "optimizer", "activations", "batch", "transient", "workspace")
PHASES = ("setup", "forward", "loss", "backward", "optimizer")
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


class BatchTooSmall(MemoryPredictionError):
    """A batch norm node normalises over the batch and needs more than one value per channel in
    training (a batch of 1 after global pooling or into BatchNorm1d): torch refuses such a step."""


BN_SINGLE = "Expected more than 1 value per channel when training"
MAX_BATCH = 1 << 31         # far beyond any device; a larger batch overflows tensor sizes of the step
MAX_BUDGET = 1 << 60        # an exbibyte: a larger budget is a typo, not a device


class Cancelled(Exception):
    """A search was asked to stop (its ``stop()`` returned True) between two predictions."""


@dataclass
class MemoryPrediction:
    """The peak of a training step and what holds it.

    ``parts``: live bytes at the peak by kind (:data:`PARTS`); ``peak_phase``/``peak_node``: where
    the peak is reached; ``phase_peaks``: the parts at each phase's own high point; ``nodes``: per graph node, the bytes it holds at the peak (``at_peak``),
    its weights and the activations it saves for backward (``saved``).

    ``unmodelled_bytes``: an upper bound of what the step may allocate beyond ``peak_bytes`` that the
    prediction does not model, 0 where it models everything it knows of. bf16 on a CPU with native bf16
    kernels (AVX512-BF16, AMX): oneDNN keeps packed copies of weights and per-thread fp32 buffers of
    weight gradients whose size depends on its kernel choice: up to two fp32 copies of the weights.
    Measured: digits_cnn at batch 32 and 64 on an AVX512-BF16 CPU 17% and 10% under, 3% at 128; vit_tiny
    at batch 1 on an AMX CPU 10% under (fp32, and bf16 on the slow path, within 1%).
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
    unmodelled_bytes: int = 0
    frozen: list[str] = field(default_factory=list)     # blocks without gradients or optimizer state

    @property
    def most_bytes(self) -> int:
        """The peak with what is not modelled at its bound: what a budget must hold for the step to fit."""
        return self.peak_bytes + self.unmodelled_bytes

    def unmodelled_note(self) -> str:
        """What the prediction leaves out, in one phrase for a person ('' where it leaves out nothing known)."""
        if not self.unmodelled_bytes:
            return ""
        return f"up to {self.unmodelled_bytes / MiB:,.1f} MiB more on this CPU's bf16 kernels (not modelled)"

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
                "checkpoint": list(self.checkpoint), "nodes": {k: dict(v) for k, v in self.nodes.items()},
                "unmodelled_bytes": self.unmodelled_bytes, "frozen": list(self.frozen)}


# ------------------------------------------------------------------------- prediction
def predict_memory(graph: Graph, batch: int, optimizer: str | OptimSpec = "adamw", precision: str = "fp32",
                   channels_last: bool = False, device: str = "cpu", *,
                   checkpoint: Sequence[str] = (), resident: int = 0, frozen: Sequence[str] = ()) -> MemoryPrediction:
    """The peak memory of a training step of ``graph`` at ``batch`` and what holds it.

    ``optimizer``: a name (:data:`trainer.spec.OPTIMIZERS`) or an :class:`OptimSpec`; ``precision``:
    fp32 or bf16 (autocast, as the loop does); ``device``: "cpu" or "cuda" (CUDA: every block rounded
    up to the caching allocator's 512 bytes). ``checkpoint``: segments run under activation
    checkpointing (group ids or 'first..last' node ranges, :mod:`trainer.memory.recomputation`).
    ``resident``: bytes the run keeps on the device outside the step, the dataset when the loaders
    hold it there (part "data", live at every moment; :func:`trainer.memory.doctor.resident_data_bytes`).
    ``frozen``: blocks that do not train (``model.frozen``: group ids, node ids, ranges): their weights
    count, but they get no gradients and no optimizer state, as in the run. No real memory is used.
    """
    spec = _check_args(batch, optimizer, precision, device)
    if isinstance(resident, bool) or not isinstance(resident, int) or resident < 0:
        raise MemoryPredictionError(f"resident: must be a byte count >= 0, got {resident!r}")
    try:
        built = build_module(graph, device="meta")
        if frozen:   # as the run freezes them: no grad, BatchNorm in eval
            freeze(built, graph, ModelSpec(frozen=list(frozen)))
        model = checkpointed_module(built, graph, list(checkpoint), "checkpoint")
    except (GraphError, SegmentError) as exc:  # both name the node or entry
        raise MemoryPredictionError(f"model.graph: {exc}" if isinstance(exc, GraphError) else str(exc)) from None
    except SpecError as exc:                   # a frozen entry that names no block
        raise MemoryPredictionError("; ".join(exc.problems)) from None
    tracker = StorageTracker(CUDA_BLOCK if device.startswith("cuda") else 1)
    try:
        log, start = _run_steps(graph, model, tracker, spec, batch, precision, channels_last)
    except Exception as exc:
        node = tracker.node if tracker.node in graph.nodes else None
        if isinstance(exc, ValueError) and BN_SINGLE in str(exc):
            raise BatchTooSmall(f"batch {batch}: {node_label(graph, node)} normalises over the batch and needs "
                                "more than one value per channel in training: use a batch of 2 or more", node) from None
        message = describe(exc, node_label(graph, node), "the training step's memory cannot be predicted")
        if message is None:
            raise
        raise DataDependentStep(message, node) from None
    pred = _read(tracker, log, start, batch=batch, optimizer=spec.name, precision=precision,
                 channels_last=channels_last, device=device, model=model, checkpoint=list(checkpoint),
                 frozen=list(frozen))
    # Live through the whole step, so the peak stays where it is, higher by them: the dataset where the
    # loaders hold it on the device, and on CUDA the cuBLAS workspaces.
    constant = {"data": resident}
    if device.startswith("cuda"):
        constant["workspace"] = len(tracker.cublas_threads) * cublas_workspace_bytes()
    if native_bf16_cpu(device, precision):
        pred.unmodelled_bytes = 2 * 4 * sum(p.numel() for p in model.parameters())
    for part, nbytes in constant.items():
        if nbytes:
            pred.parts[part] = nbytes
            pred.peak_bytes += nbytes
            for parts in pred.phase_peaks.values():
                parts[part] = nbytes
    return pred


def native_bf16_cpu(device: str, precision: str) -> bool:
    """A bf16 step on a CPU with native bf16 kernels (AVX512-BF16, AMX): oneDNN's packed weights and
    buffers come on top of the prediction (:attr:`MemoryPrediction.unmodelled_bytes`)."""
    return device == "cpu" and precision == "bf16" and bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def cublas_workspace_bytes() -> int:
    """One cuBLAS workspace as PyTorch sizes it: ``CUBLAS_WORKSPACE_CONFIG`` (``:KiB:count`` pairs), else
    32 MiB on Hopper and Blackwell and 8 MiB + 128 KiB before them. PyTorch takes it from the caching
    allocator and keeps it, one per thread that runs a matrix product: the step's own and autograd's
    CUDA thread in backward. Measured on an H200 (torch 2.11): 64 MiB more allocated after a
    resnet18_cifar step than its weights, gradients and optimizer state. Without a GPU the card is
    unknown, and the larger size is assumed."""
    config = os.environ.get("CUBLAS_WORKSPACE_CONFIG", "")
    pairs = re.findall(r":(\d+):(\d+)", config)
    if pairs:
        return sum(int(kib) * 1024 * int(count) for kib, count in pairs)
    major = torch.cuda.get_device_capability()[0] if torch.cuda.is_available() else 9
    return 32 * MiB if major in (9, 10) else 4096 * 1024 * 2 + 16 * 1024 * 8


def _run_steps(graph: Graph, model: nn.Module, tracker: StorageTracker, spec: OptimSpec, batch: int, precision: str,
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
        stack.enter_context(attributed(model, opt, tracker))
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
    if batch > MAX_BATCH:
        raise MemoryPredictionError(f"batch: {batch:,} samples is more than {MAX_BATCH:,}, where the step's tensor "
                                    "sizes overflow; no device holds such a batch")
    spec = optimizer if isinstance(optimizer, OptimSpec) else OptimSpec(name=str(optimizer))
    if spec.name not in OPTIMIZERS:
        raise MemoryPredictionError(f"optimizer: unknown optimizer '{spec.name}' (choose {', '.join(OPTIMIZERS)})")
    if precision not in ("fp32", "bf16"):
        raise MemoryPredictionError(f"precision: the prediction knows fp32 and bf16, got '{precision}'")
    if not re.fullmatch(r"cpu|cuda(:[0-9]+)?", device):
        raise MemoryPredictionError(f"device: choose cpu, cuda or cuda:N (N a GPU index), got '{device}'")
    return spec


def _read(tracker: StorageTracker, log: list[tuple[int, int]], start: set[int], *, model: nn.Module,
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
    last = tracker.blocks[log[peak_at][0]] if peak_at >= 0 else Block(0, "", "", "setup")
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


def _parts(tracker: StorageTracker, keys: set[int]) -> dict[str, int]:
    parts = dict.fromkeys(PARTS, 0)
    for key in keys:
        b = tracker.blocks[key]
        parts[b.kind] += b.nbytes
    return parts


def _node(nodes: dict[str, dict[str, int]], name: str) -> dict[str, int]:
    return nodes.setdefault(name, {"at_peak": 0, "saved": 0, "weights": 0})


# ------------------------------------------------------------------------- largest batch
CUDA_CONTEXT = 512 * MiB   # the CUDA context and cuBLAS/cuDNN handles, outside the allocator
CUDA_SLACK = 0.05              # the caching allocator's fragmentation, as a fraction of the rest
SEARCH_UPPER = 1 << 16         # largest_batch searches no further: 65,536 means "65,536 or more"


def usable_bytes(total: int, device: str) -> int:
    """What a training step may use of a device with ``total`` bytes: on CUDA less the context
    and the allocator's slack; on the CPU all of it (the caller passes what is free)."""
    if device.startswith("cuda"):
        return max(int((total - CUDA_CONTEXT) * (1 - CUDA_SLACK)), 0)
    return total


def largest_batch(graph: Graph, budget: int, *, optimizer: str | OptimSpec = "adamw", precision: str = "fp32",
                  channels_last: bool = False, device: str = "cpu", upper: int = SEARCH_UPPER,
                  checkpoint: Sequence[str] = (), stop: Callable[[], bool] | None = None, resident: int = 0,
                  frozen: Sequence[str] = ()) -> tuple[int, MemoryPrediction | None]:
    """The largest batch whose predicted peak, with what it does not model at its bound, fits ``budget`` bytes, and its prediction (0 and None
    when not even the smallest batch fits). Fits ``peak = c0 + c1*b`` from two predictions, then confirms or
    steps down with real predictions (attention makes the peak slightly more than linear). The search
    starts at batch 1, or 2 where batch norm needs more than one sample (:class:`BatchTooSmall`), and
    stops at ``upper``: a result of ``upper`` means "``upper`` or more" (:func:`search_capped`).
    ``stop`` is asked before each prediction; True raises :class:`Cancelled`."""
    kw: dict[str, Any] = dict(optimizer=optimizer, precision=precision, channels_last=channels_last, device=device,
                              checkpoint=checkpoint, resident=resident, frozen=frozen)
    if budget <= 0 or budget > MAX_BUDGET:
        raise MemoryPredictionError(f"budget: must be positive and at most {MAX_BUDGET:,} bytes, got {budget:,}")

    def predict(b: int) -> MemoryPrediction:
        if stop is not None and stop():   # before every prediction: a closed dialog waits for none
            raise Cancelled
        return predict_memory(graph, b, **kw)

    first = 1
    try:
        p1 = predict(first)
    except BatchTooSmall:
        first = 2
        p1 = predict(first)
    if p1.most_bytes > budget:
        return 0, None
    p8 = predict(first + 7)
    slope = max((p8.most_bytes - p1.most_bytes) / 7, 1.0)
    guess = max(first, min(upper, int((budget - p1.most_bytes) / slope) + first))
    known = {first: p1, first + 7: p8}
    good, bad = first, upper + 1
    for _ in range(12):
        if guess in known:
            pred = known[guess]
        else:
            pred = known[guess] = predict(guess)
        if pred.most_bytes <= budget:
            good = max(good, guess)
        else:
            bad = min(bad, guess)
        if bad - good <= 1:
            break
        # step within the bracket: linear interpolation of what is known, kept strictly inside
        lo, hi = known[good].most_bytes, known[bad].most_bytes if bad in known else None
        if hi is None:
            guess = min(upper, max(good + 1, int(good + (budget - lo) / slope)))
            if guess == good:
                break
        else:
            frac = (budget - lo) / max(hi - lo, 1)
            guess = min(bad - 1, max(good + 1, good + int(math.floor(frac * (bad - good)))))
    return good, known[good]


def search_capped(largest: int, upper: int = SEARCH_UPPER) -> bool:
    """Whether a :func:`largest_batch` result is its search's cap (the batch that fits may be larger)."""
    return largest >= upper
