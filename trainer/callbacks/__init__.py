"""The training loop's extension points: a :class:`Callback` per feature, Lightning's ``Callback`` as the model.

Reporting (store and emit metrics), memory samples, checkpoints, the worker's commands, inspection
and memory recording each plug into the loop as one callback, called at named moments:

- ``wrap_step(step_fn)``: once, at set-up, for a feature that runs some steps its own way
  (inspection, memory recording); the step path of the others is untouched.
- ``on_step_end(step)``: after every step. Host-side bookkeeping only: no ``.item()``, no sync. True
  stops the run; it may block (a pause). The loop calls only the callbacks that override it.
- ``on_metrics(window)``: a window of steps was read from the device (every ``interval_s`` of training).
- ``on_epoch_end(event)``: an epoch was evaluated and stored; the callbacks run in their list's order.
- ``on_checkpoint(event)``: a checkpoint was written and recorded (in a one-process run on the
  recorder thread, which writes it: :mod:`trainer.checkpoints.saving`).

Reporting and memory samples are here (:mod:`.reporting`); the commands and checkpoints are in
:mod:`trainer.job`, inspection in :mod:`trainer.inspection`, memory recording in :mod:`trainer.memory.timeline`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

    from ..protocol.events import Checkpoint, EpochEnd

    StepFn = Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


@dataclass(frozen=True)
class MetricsWindow:
    """Training steps read from the device at once: their losses and correct counts, at ``step``."""

    step: int
    epoch: int
    losses: list[float]
    correct: list[float]
    lr: float
    samples_per_s: float


class Callback:
    """A feature plugged into the loop; each moment does nothing here, a feature overrides what it needs."""

    def wrap_step(self, step_fn: StepFn) -> StepFn:
        return step_fn

    def on_step_end(self, step: int) -> bool:
        return False

    def on_metrics(self, window: MetricsWindow) -> None:
        return None

    def on_epoch_end(self, event: EpochEnd) -> None:
        return None

    def on_checkpoint(self, event: Checkpoint) -> None:
        return None


def stepping(callbacks: Sequence[Callback]) -> list[Callback]:
    """The callbacks that do something after each step (the loop calls only these, per step)."""
    return [cb for cb in callbacks if type(cb).on_step_end is not Callback.on_step_end]
