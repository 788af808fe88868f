"""The training loop: ``train_step``, ``train_one_epoch``, ``evaluate``. It reads top to bottom.

Costs, where they matter: a step launches the forward, backward and optimizer kernels and one
argmax, and hands its loss, predictions and labels (device tensors) to the ``Window`` -- no
``.item()``, no host/device sync, no other per-step kernel. The host reads the window (one sync,
the correct counts batched there) at most every ``metrics_interval_s`` of training and at the end of
an epoch; that read is also where a NaN/inf loss is found, to the exact step. The run's first step
is reported on its own, so its curves start at step 1 (with a window of 0.25 s a quick first epoch
of digits showed its first point at step 11 of 19). What an epoch's last steps add goes into its
totals at once but is reported with the next window, so epochs shorter than the interval do not raise
the event rate (or cost a store write each).
Batch shapes never change (ragged last batch dropped in training, padded in evaluation), so a
compiled model compiles once for training and once for evaluation and is then reused every epoch.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .callbacks import Callback, MetricsWindow, stepping
from .metrics.per_class import per_class
from .optim import set_lr

StepFn = Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


EVAL_FOLD = 1 << 20   # logits held before an evaluation folds them in (4 MiB of float32)


class NonFiniteLoss(RuntimeError):
    def __init__(self, step: int, value: float) -> None:
        self.step = step
        super().__init__(f"the loss became {value} at step {step}")


def autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager:
    """bf16/fp16 autocast for the forward pass; fp32 and fp8 (handled by torchao's layers) run as is."""
    if precision in ("bf16", "fp16"):
        return torch.autocast(device.type, dtype=torch.bfloat16 if precision == "bf16" else torch.float16)
    return contextlib.nullcontext()


def make_train_step(model: nn.Module, opt: torch.optim.Optimizer, *, device: torch.device, precision: str,
                    label_smoothing: float, compile_mode: str = "off",
                    ) -> tuple[StepFn, torch.amp.GradScaler | None]:
    """One optimizer step on a batch, returning (loss, predicted classes) as device tensors, never
    synced; and the fp16 grad scaler (None otherwise), whose state checkpoints keep."""
    scaler = torch.amp.GradScaler(device.type) if precision == "fp16" else None
    opt_step: Callable[..., object] = opt.step
    if compile_mode != "off":
        # The optimizer step compiles into a few fused kernels; its lr is a tensor, so changing it
        # does not recompile.
        opt_step = torch.compile(opt.step, fullgraph=False)

    def train_step(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # The last step's gradients go before the forward, not after it: kept through the forward
        # they add a model's worth of bytes to the step's peak (resnet18_cifar: 4-6% of it).
        opt.zero_grad(set_to_none=True)
        with autocast(device, precision):
            logits = model(x)
            loss = F.cross_entropy(logits, y, label_smoothing=label_smoothing)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt_step()
        # The predictions, not the logits: a CUDA-graph output is overwritten by the next replay.
        return loss.detach(), logits.detach().argmax(1)

    return train_step, scaler


class Window:
    """Training metrics on their way to a report.

    Device side: each step's loss, predictions and labels, recorded with three list appends (no
    kernel, no sync). :meth:`read` turns them into losses and correct counts on the host (a few
    batched ops, one copy) and keeps them as pending until :meth:`take` hands them to a report,
    with the training time they took.
    """

    def __init__(self, capacity: int = 1024,
                 reduce: Callable[[torch.Tensor], torch.Tensor] | None = None) -> None:
        self.reduce = reduce      # under torchrun: every rank's window made global (a collective)
        self.losses: list[torch.Tensor] = []
        self.preds: list[torch.Tensor] = []
        self.labels: list[torch.Tensor] = []
        self.capacity = capacity
        self.pending_losses: list[float] = []
        self.pending_correct: list[float] = []
        self.pending_seconds = 0.0

    @property
    def count(self) -> int:
        return len(self.losses)

    @property
    def full(self) -> bool:
        return len(self.losses) >= self.capacity

    def record(self, loss: torch.Tensor, pred: torch.Tensor, labels: torch.Tensor) -> None:
        self.losses.append(loss)
        self.preds.append(pred)
        # MixUp/CutMix labels are class probabilities: a prediction is right on the dominant class
        self.labels.append(labels.argmax(1) if labels.dim() == 2 else labels)

    def read(self, first_step: int, seconds: float = 0.0) -> tuple[list[float], list[float]]:
        """The recorded steps' losses and correct counts (one host/device sync), also kept as
        pending with ``seconds`` of training; raises NonFiniteLoss naming the first bad step."""
        self.pending_seconds += seconds
        if not self.losses:
            return [], []
        correct = (torch.stack(self.preds) == torch.stack(self.labels)).sum(1)
        stacked = torch.stack([torch.stack(self.losses).float(), correct.float()])
        if self.reduce is not None:
            stacked = self.reduce(stacked)
        self.losses, self.preds, self.labels = [], [], []
        losses, corrects = stacked.cpu().numpy()       # the sync
        bad = np.flatnonzero(~np.isfinite(losses))
        if bad.size:
            # named as the metrics name steps: by the count of steps done with it
            raise NonFiniteLoss(first_step + int(bad[0]) + 1, float(losses[bad[0]]))
        out = losses.tolist(), corrects.tolist()
        self.pending_losses += out[0]
        self.pending_correct += out[1]
        return out

    def take(self) -> tuple[list[float], list[float], float]:
        """The pending losses, correct counts and training seconds, now reported; pending is empty."""
        out = self.pending_losses, self.pending_correct, self.pending_seconds
        self.pending_losses, self.pending_correct, self.pending_seconds = [], [], 0.0
        return out


@dataclass
class EpochTotals:
    """Host-side running sums of the epoch's training loss and accuracy (survive a mid-epoch checkpoint)."""

    loss_sum: float = 0.0
    correct: float = 0.0
    samples: int = 0
    steps: int = 0

    def add(self, losses: list[float], correct: list[float], batch: int) -> None:
        self.loss_sum += sum(losses) * 1.0
        self.correct += sum(correct)
        self.samples += batch * len(losses)
        self.steps += len(losses)

    @property
    def loss(self) -> float:
        return self.loss_sum / max(self.steps, 1)

    @property
    def accuracy(self) -> float:
        return self.correct / max(self.samples, 1)


@dataclass
class Loop:
    """How the epoch runs: the rate for a step, the features plugged in (:mod:`trainer.callbacks`), how
    often the metrics window is read."""

    lr_at: Callable[[int], float]
    callbacks: Sequence[Callback] = ()
    interval_s: float = 0.25
    clock: Callable[[], float] = field(default=time.perf_counter)
    # Under torchrun: (stop, read now) -> rank 0's, so that every rank stops and reads at the same step.
    agree: Callable[[bool, bool], tuple[bool, bool]] | None = None


def train_one_epoch(step_fn: StepFn, opt: torch.optim.Optimizer, batches, *, epoch: int, step: int,
                    batch_size: int, window: Window, totals: EpochTotals, loop: Loop) -> tuple[int, bool]:
    """Run the epoch's remaining batches; returns (steps done in total, stopped early).

    Metrics are reported after the run's first step, then every ``loop.interval_s`` of training (and
    when stopping); the epoch's last steps are read into ``totals`` at its end and reported with the
    next window, or by :func:`report_pending` when the run ends.
    """
    window_start, mark = step, loop.clock()
    lr = loop.lr_at(step)
    after_step = stepping(loop.callbacks)     # a short list (the commands): all a step pays for callbacks
    for x, y, _ in batches:
        lr = loop.lr_at(step)
        set_lr(opt, lr)                       # host float math; a tensor lr is filled on the device
        loss, pred = step_fn(x, y)            # kernels queued; nothing waits for them here
        window.record(loss, pred, y)
        first = step == 0                     # the run's first step (a resumed run has its curves)
        step += 1
        before = loop.clock()
        stop = False
        for callback in after_step:
            stop = callback.on_step_end(step) or stop   # may block while paused
        now = loop.clock()
        if now - before > 0.05:
            mark += now - before              # a pause does not count as training time
        due = stop or first or window.full or window.pending_seconds + now - mark >= loop.interval_s
        if loop.agree is not None:
            stop, due = loop.agree(stop, due)
        if due:
            totals.add(*window.read(window_start, now - mark), batch_size)   # the host/device sync point
            window_start, mark = step, now
            if stop or first or window.pending_seconds >= loop.interval_s:
                report_pending(window, loop, step, epoch, lr, batch_size)
        if stop:
            return step, True
    totals.add(*window.read(window_start, loop.clock() - mark), batch_size)
    return step, False


def report_pending(window: Window, loop: Loop, step: int, epoch: int, lr: float, batch_size: int) -> None:
    """Hand what the window holds to the callbacks' ``on_metrics`` (nothing when it holds nothing), as of ``step``."""
    losses, correct, seconds = window.take()
    if losses:
        read = MetricsWindow(step, epoch, losses, correct, lr, len(losses) * batch_size / max(seconds, 1e-9))
        for callback in loop.callbacks:
            callback.on_metrics(read)


@dataclass
class Evaluation:
    loss: float
    accuracy: float
    confusion: np.ndarray  # rows = true class, columns = predicted class

    def per_class(self) -> dict[str, list[Any]]:
        """Precision, recall and F1 of every class (0 where undefined), and its support, as the
        events and the store carry them (:func:`trainer.metrics.per_class.per_class`)."""
        return per_class(self.confusion).to_dict()


@torch.no_grad()
def evaluate(model: nn.Module, loader, num_classes: int, *, device: torch.device, precision: str,
             reduce: Callable[[torch.Tensor], torch.Tensor] | None = None) -> Evaluation:
    """Loss, accuracy and confusion matrix over a split; one host/device sync at the end. ``reduce``
    (under torchrun, each rank evaluating its share): [loss sum, rows, confusion counts] summed over
    the ranks, in float64 (counts exact to 2**53)."""
    model.eval()
    loss_sum = torch.zeros((), device=device)
    confusion = torch.zeros(num_classes * num_classes, dtype=torch.long, device=device)
    held: list[tuple[torch.Tensor, torch.Tensor]] = []   # batches' logits and labels not yet folded in
    n = held_rows = 0

    def fold() -> None:
        nonlocal held_rows
        # The loss and confusion of the batches held, in a few kernels for all of them: per batch they were
        # 20% of a LeNet-5 val pass on two cores (36 ms an epoch against a plain loop's 30).
        logits, labels = torch.cat([h[0] for h in held]).float(), torch.cat([h[1] for h in held])
        loss_sum.add_(F.cross_entropy(logits, labels, reduction="sum"))
        confusion.add_(torch.bincount(labels * num_classes + logits.argmax(1), minlength=num_classes ** 2))
        held.clear()
        held_rows = 0

    for x, y, valid in loader.batches(loader.order()):
        with autocast(device, precision):
            logits = model(x)                 # fixed batch shape: the padded tail is dropped here
        # a CUDA graph's output is overwritten by its next replay: kept on CUDA as a copy
        held.append((logits[:valid] if device.type == "cpu" else logits[:valid].clone(), y[:valid]))
        n, held_rows = n + valid, held_rows + valid
        if held_rows * num_classes >= EVAL_FOLD:
            fold()
    if held:
        fold()
    model.train()
    if reduce is not None:
        sums = reduce(torch.cat([loss_sum.double().view(1), torch.tensor([float(n)], dtype=torch.float64,
                                 device=device), confusion.double()]))
        loss_sum, n, confusion = sums[0], int(sums[1].item()), sums[2:].round().long()
    conf = confusion.view(num_classes, num_classes).cpu().numpy()   # the sync
    total = max(n, 1)
    return Evaluation(float(loss_sum.item()) / total, float(np.trace(conf)) / total, conf)
