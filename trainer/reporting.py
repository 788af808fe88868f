"""What a run tells: its metrics and memory samples, stored and emitted, as loop callbacks.

:class:`Reporter` stores each metrics window (on the recorder thread: the training step does not wait
for the disk) and emits it, and emits the epoch-end and checkpoint events; :class:`MemorySamples`
stores and emits a memory sample every 2 s of training and at each epoch's end.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import torch

from .callbacks import Callback, MetricsWindow
from .memory.samples import memory_sample, rss_bytes
from .metrics import names
from .metrics.names import rows as metric_rows
from .protocol import events as ev

if TYPE_CHECKING:
    from .job import Job

MEMORY_EVERY_S = 2.0   # a memory sample at most this often during training


class Reporter(Callback):
    """Metrics windows stored then emitted (a reader that saw the event finds the rows); epoch ends and
    checkpoints emitted (their rows are written before the callbacks run)."""

    def __init__(self, job: Job) -> None:
        self.job = job

    def on_metrics(self, window: MetricsWindow) -> None:
        report_metrics(self.job, window)

    def on_epoch_end(self, event: ev.EpochEnd) -> None:
        self.job.emitter.emit(event)

    def on_checkpoint(self, event: ev.Checkpoint) -> None:
        self.job.emitter.emit(event)


class MemorySamples(Callback):
    """A memory sample every :data:`MEMORY_EVERY_S` of training (off the training thread) and at each epoch's end."""

    def __init__(self, job: Job) -> None:
        self.job = job

    def on_metrics(self, window: MetricsWindow) -> None:
        if time.monotonic() - self.job.last_memory >= MEMORY_EVERY_S:
            emit_memory(self.job, window.step, background=True)

    def on_epoch_end(self, event: ev.EpochEnd) -> None:
        emit_memory(self.job, event.step)


def report_metrics(job: Job, window: MetricsWindow) -> None:
    """Store a window of training metrics, then emit it (a reader that saw the event finds the rows)."""
    b, losses, correct, step = job.spec.train.batch_size, window.losses, window.correct, window.step
    loss, acc = sum(losses) / len(losses), sum(correct) / (b * len(correct))
    event = ev.Metrics(step=step, epoch=window.epoch, loss=loss, accuracy=acc, lr=window.lr,
                       samples_per_s=round(window.samples_per_s, 1))
    # "time" (the run's clock, Job.elapsed) and "epoch" give the Runs comparison its wall-time and
    # epoch x axes; two more rows of the same batched insert.
    rows = metric_rows(event, step) + [(step, names.TIME.name, job.elapsed()),
                                       (step, names.EPOCH.name, float(window.epoch))]

    def write() -> None:   # on the recorder thread: the training step does not wait for the disk
        job.store.add_metrics(job.run_id, rows)
        job.emitter.emit(event)

    job.recorder.submit(write)


def emit_memory(job: Job, step: int, background: bool = False) -> None:
    """Store and emit a memory sample (on the recorder thread when ``background``)."""
    sample = memory_sample(job.setup.device, step)
    job.last_memory = now = time.monotonic()
    cpu, (cpu0, wall0) = time.process_time(), job.last_cpu
    job.last_cpu = (cpu, now)
    # System curves: the process's CPU use since the last sample (100 = one core busy), its RSS and
    # its CPU threads (trainer.adaptive_threads: fewer while other processes use the cores).
    system = [(step, names.CPU_PERCENT.name, 100.0 * (cpu - cpu0) / max(now - wall0, 1e-6)),
              (step, names.RSS.name, float(rss_bytes())), (step, names.THREADS.name, float(torch.get_num_threads()))]

    def write() -> None:
        job.store.add_metrics(job.run_id, [*metric_rows(sample, step), *system])
        job.emitter.emit(sample)

    if background:
        job.recorder.submit(write)
    else:
        job.recorder.flush()
        write()
