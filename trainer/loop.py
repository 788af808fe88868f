"""The training loop: ``train_step``, ``train_one_epoch``, ``evaluate``. It reads top to bottom.

Costs, where they matter: a step launches the forward, backward and optimizer kernels and
hands its loss and correct count (device tensors) to the ``Window`` -- no ``.item()``, no
host/device sync. The host reads the buffers (one sync) at most every ``metrics_interval_s`` and at
the end of the epoch; that read is also where a NaN/inf loss is found, to the exact step.
Batch shapes never change (ragged last batch dropped in training, padded in evaluation), so a
compiled model compiles once for training and once for evaluation and is then reused every epoch.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .optim import set_lr

StepFn = Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


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
    """One optimizer step on a batch, returning (loss, correct) as device tensors, never synced;
    and the fp16 grad scaler (None otherwise), whose state checkpoints keep."""
    scaler = torch.amp.GradScaler(device.type) if precision == "fp16" else None
    opt_step = opt.step
    if compile_mode != "off":
        # The optimizer step compiles into a few fused kernels; its lr is a tensor, so changing it
        # does not recompile.
        opt_step = torch.compile(opt.step, fullgraph=False)

    def train_step(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with autocast(device, precision):
            logits = model(x)
            loss = F.cross_entropy(logits, y, label_smoothing=label_smoothing)
        opt.zero_grad(set_to_none=True)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt_step()
        return loss.detach(), (logits.detach().argmax(1) == y).sum()

    return train_step, scaler


class Window:
    """Per-step losses and correct counts, kept as device tensors until the host reads them.

    Recording is two list appends: no kernel, no sync. The read stacks them (two ops) and copies
    once to the host.
    """

    def __init__(self, capacity: int = 1024) -> None:
        self.losses: list[torch.Tensor] = []
        self.correct: list[torch.Tensor] = []
        self.capacity = capacity

    @property
    def count(self) -> int:
        return len(self.losses)

    @property
    def full(self) -> bool:
        return len(self.losses) >= self.capacity

    def record(self, loss: torch.Tensor, correct: torch.Tensor) -> None:
        self.losses.append(loss)
        self.correct.append(correct)

    def read(self, first_step: int) -> tuple[list[float], list[float]]:
        """The recorded values (one host/device sync); raises NonFiniteLoss naming the first bad step."""
        if not self.losses:
            return [], []
        stacked = torch.stack([torch.stack(self.losses).float(), torch.stack(self.correct).float()])
        self.losses, self.correct = [], []
        losses, correct = stacked.cpu().numpy()       # the sync
        bad = np.flatnonzero(~np.isfinite(losses))
        if bad.size:
            raise NonFiniteLoss(first_step + int(bad[0]), float(losses[bad[0]]))
        return losses.tolist(), correct.tolist()


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
class LoopHooks:
    """What the epoch asks of the worker: the rate for a step, a metrics report, commands to honour."""

    lr_at: Callable[[int], float]
    report: Callable[[int, int, list[float], list[float], float, float], None]  # step, epoch, losses, correct, lr, s
    poll: Callable[[int], bool]  # called after each step with the step; True = stop now
    interval_s: float = 0.25
    clock: Callable[[], float] = field(default=time.perf_counter)


def train_one_epoch(step_fn: StepFn, opt: torch.optim.Optimizer, batches, *, epoch: int, step: int,
                    batch_size: int, window: Window, totals: EpochTotals, hooks: LoopHooks) -> tuple[int, bool]:
    """Run the epoch's remaining batches; returns (steps done in total, stopped early)."""
    window_start, t0 = step, hooks.clock()
    lr = hooks.lr_at(step)
    for x, y, _ in batches:
        lr = hooks.lr_at(step)
        set_lr(opt, lr)                       # host float math; a tensor lr is filled on the device
        loss, correct = step_fn(x, y)         # kernels queued; nothing waits for them here
        window.record(loss, correct)
        step += 1
        before = hooks.clock()
        stop = hooks.poll(step)               # may block while paused
        now = hooks.clock()
        t0 += now - before if now - before > 0.05 else 0.0   # a pause does not count as training time
        if stop or window.full or now - t0 >= hooks.interval_s:
            losses, corrects = window.read(window_start)   # the host/device sync point
            totals.add(losses, corrects, batch_size)
            hooks.report(step, epoch, losses, corrects, lr, len(losses) * batch_size / max(hooks.clock() - t0, 1e-9))
            window_start, t0 = step, hooks.clock()
        if stop:
            return step, True
    losses, corrects = window.read(window_start)
    if losses:
        totals.add(losses, corrects, batch_size)
        hooks.report(step, epoch, losses, corrects, lr, len(losses) * batch_size / max(hooks.clock() - t0, 1e-9))
    return step, False


@dataclass
class Evaluation:
    loss: float
    accuracy: float
    confusion: np.ndarray  # rows = true class, columns = predicted class

    def per_class(self) -> dict[str, list[float]]:
        """Precision, recall and F1 of every class (0 where undefined), and its support."""
        c = self.confusion.astype(np.float64)
        tp, predicted, actual = np.diag(c), c.sum(axis=0), c.sum(axis=1)
        precision = np.divide(tp, predicted, out=np.zeros_like(tp), where=predicted > 0)
        recall = np.divide(tp, actual, out=np.zeros_like(tp), where=actual > 0)
        denom = precision + recall
        f1 = np.divide(2 * precision * recall, denom, out=np.zeros_like(tp), where=denom > 0)
        return {"precision": _r(precision), "recall": _r(recall), "f1": _r(f1),
                "support": [int(v) for v in actual]}


def _r(a: np.ndarray) -> list[float]:
    return [round(float(v), 6) for v in a]


@torch.no_grad()
def evaluate(model: nn.Module, loader, num_classes: int, *, device: torch.device, precision: str) -> Evaluation:
    """Loss, accuracy and confusion matrix over a split; one host/device sync at the end."""
    model.eval()
    loss_sum = torch.zeros((), device=device)
    confusion = torch.zeros(num_classes * num_classes, dtype=torch.long, device=device)
    n = 0
    for x, y, valid in loader.batches(loader.order()):
        with autocast(device, precision):
            logits = model(x)                 # fixed batch shape: the padded tail is dropped below
        logits, y = logits[:valid].float(), y[:valid]
        loss_sum += F.cross_entropy(logits, y, reduction="sum")
        confusion += torch.bincount(y * num_classes + logits.argmax(1), minlength=num_classes ** 2)
        n += valid
    model.train()
    conf = confusion.view(num_classes, num_classes).cpu().numpy()   # the sync
    total = max(n, 1)
    return Evaluation(float(loss_sum.item()) / total, float(np.trace(conf)) / total, conf)
