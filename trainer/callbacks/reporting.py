"""What a run tells: its metrics and memory samples, stored and emitted, as loop callbacks.

:class:`Reporter` stores each metrics window (on the recorder thread: the training step does not wait
for the disk) and emits it, and emits the epoch-end and checkpoint events; :class:`MemorySamples`
stores and emits a memory sample every 2 s of training and at each epoch's end, and gives the C heap's
free pages back when the process has grown (checked every 0.5 s).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Protocol

import torch

from ..memory.samples import HeapTrim, gpu_utilisation, memory_sample, rss_bytes
from ..metrics import names
from ..metrics.names import rows as metric_rows
from ..protocol import events as ev
from . import Callback, MetricsWindow

if TYPE_CHECKING:
    from ..checks import Setup
    from ..metrics.recorder import Recorder
    from ..store.runs import RunStore

MEMORY_EVERY_S = 2.0   # a memory sample at most this often during training


class Job(Protocol):
    """What reporting reads of a run in progress (:class:`trainer.job.Job` is one)."""

    setup: Setup
    store: RunStore
    emitter: ev.Emitter
    run_id: int
    recorder: Recorder
    last_memory: float
    last_cpu: tuple[float, float]

    @property
    def spec(self) -> Any: ...

    def elapsed(self) -> float: ...


class Reporter(Callback):
    """Metrics windows stored then emitted (a reader that saw the event finds the rows); epoch ends and
    checkpoints emitted (their rows are written before the callbacks run)."""

    def __init__(self, job: Job) -> None:
        self.job = job

    def on_metrics(self, window: MetricsWindow) -> None:
        report_metrics(self.job, window)

    def on_epoch_end(self, event: ev.EpochEnd) -> None:
        self.job.recorder.submit(lambda: self.job.emitter.emit(event))   # after the epoch's rows

    def on_checkpoint(self, event: ev.Checkpoint) -> None:
        self.job.emitter.emit(event)


class MemorySamples(Callback):
    """A memory sample every :data:`MEMORY_EVERY_S` of training and at each epoch's end (stored and emitted
    off the training thread)."""

    def __init__(self, job: Job) -> None:
        self.job = job
        # glibc keeps the pages of freed batch-sized blocks (600 steps of 60,000 images: +63 MiB untrimmed);
        # they are given back at a step's end once the process has grown 4 MiB (memory.samples.HeapTrim)
        self.trim = HeapTrim()

    def on_step_end(self, step: int) -> bool:
        self.trim()     # a read of /proc/self/statm (~14 us); a trim, rarely, a few ms
        return False

    def on_metrics(self, window: MetricsWindow) -> None:
        now = time.monotonic()
        if now - self.job.last_memory >= MEMORY_EVERY_S:
            emit_memory(self.job, window.step, background=True)

    def on_epoch_end(self, event: ev.EpochEnd) -> None:
        emit_memory(self.job, event.step, background=True)   # after the epoch's checkpoint, not waiting for it


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
    """Store and emit a memory sample (taken, stored and emitted on the recorder thread when ``background``:
    the training thread does not wait for the store)."""
    job.last_memory = now = time.monotonic()
    cpu, (cpu0, wall0) = time.process_time(), job.last_cpu
    job.last_cpu = (cpu, now)
    threads = float(torch.get_num_threads())   # read here: OpenMP's count belongs to the thread that trains

    def write() -> None:
        sample = memory_sample(job.setup.device, step)
        # System curves: the process's CPU use since the last sample (100 = one core busy), its RSS, its CPU
        # threads (trainer.threads.adaptive: fewer while other processes use the cores), the GPU's use.
        system = [(step, names.CPU_PERCENT.name, 100.0 * (cpu - cpu0) / max(now - wall0, 1e-6)),
                  (step, names.RSS.name, float(rss_bytes())), (step, names.THREADS.name, threads)]
        if (busy := gpu_utilisation(job.setup.device)) is not None:   # CUDA with NVML: the GPU's utilisation too
            system.append((step, names.GPU_UTIL.name, busy))
        job.store.add_metrics(job.run_id, [*metric_rows(sample, step), *system])
        job.emitter.emit(sample)

    if background:
        job.recorder.submit(write)
    else:
        job.recorder.flush()
        write()
