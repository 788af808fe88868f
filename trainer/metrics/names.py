"""Every metric a run records, under the one name the run store, the events and the dashboards use.

A metric's ``name`` is its name in the store's metrics table (``train/loss``) and the key of its curve
in the studio; ``event`` and ``field`` say which event carries it live and under which field (the wire's
field names never change: ``metrics.loss`` is ``train/loss``). The worker writes an event's store rows
with :func:`rows` and a reader turns an event into named values with :func:`values`, so nothing else
spells a metric's name.

Adding a metric: one :func:`metric` line here, and its value on the event that carries it (a new field,
documented in :mod:`trainer.protocol.events`); the store, the Runs comparison and a followed run pick
it up from here, and the live dashboard plots it once its ``CURVES`` entry names the plot.
"""

from __future__ import annotations

from dataclasses import dataclass

from graph_editor.model.registry import Registry

from ..protocol import events as ev


@dataclass(frozen=True)
class Metric:
    """One metric: its name, what a legend or a menu calls it, the event and field that carry it."""

    name: str
    label: str
    event: str = ""      # "" when it is only stored (no event carries it)
    field: str = ""


METRICS: Registry[str, Metric] = Registry("a metric name")


def metric(name: str, label: str, event: str = "", field: str = "") -> Metric:
    """Register a metric; a name registered twice is refused."""
    m = Metric(name, label, event, field)
    METRICS.add(name, m)
    return m


TRAIN_LOSS = metric("train/loss", "train loss", ev.METRICS, "loss")
TRAIN_ACCURACY = metric("train/accuracy", "train accuracy", ev.METRICS, "accuracy")
LR = metric("lr", "learning rate", ev.METRICS, "lr")
SAMPLES_PER_S = metric("samples_per_s", "samples/s", ev.METRICS, "samples_per_s")
LR_SET = metric("lr/set", "learning rate set by hand")        # at the step a set_lr command took effect
TIME = metric("time", "seconds of the run (its clock goes on across a resume)")   # the Runs wall-time axis
EPOCH = metric("epoch", "epoch")                               # and its epoch axis
EPOCH_TRAIN_LOSS = metric("epoch/train_loss", "epoch's train loss", ev.EPOCH_END, "train_loss")
EPOCH_TRAIN_ACCURACY = metric("epoch/train_accuracy", "epoch's train accuracy", ev.EPOCH_END, "train_accuracy")
VAL_LOSS = metric("val/loss", "val loss", ev.EPOCH_END, "val_loss")
VAL_ACCURACY = metric("val/accuracy", "val accuracy", ev.EPOCH_END, "val_accuracy")
TEST_LOSS = metric("test/loss", "test loss", ev.FINISHED, "test_loss")
TEST_ACCURACY = metric("test/accuracy", "test accuracy", ev.FINISHED, "test_accuracy")
CPU_PERCENT = metric("system/cpu_percent", "CPU % (100 = one core)")
RSS = metric("system/rss", "resident memory (bytes)")
GPU_UTIL = metric("system/gpu_util", "GPU utilisation % (CUDA runs, NVML)")
THREADS = metric("system/threads", "CPU threads (fewer while other processes use the cores)")
SKIPPED_FILES = metric("data/skipped_files", "files skipped", ev.SKIPPED_FILES, "count")
DATA_WAIT = metric("data/wait", "share of an epoch's training time spent getting its batches")   # per epoch
MEMORY_ALLOCATED = metric("memory/allocated", "GPU memory allocated (bytes, CUDA runs)", ev.MEMORY, "allocated")
MEMORY_RESERVED = metric("memory/reserved", "GPU memory reserved (bytes, CUDA runs)", ev.MEMORY, "reserved")
MEMORY_PEAK = metric("memory/peak", "GPU memory peak (bytes, CUDA runs)", ev.MEMORY, "peak")
MEMORY_RSS = metric("memory/rss", "worker resident set (bytes, CPU runs)", ev.MEMORY, "rss")
MEMORY_PEAK_RSS = metric("memory/peak_rss", "worker resident set peak (bytes, CPU runs)", ev.MEMORY, "peak_rss")
MEMORY_ACTIVE = metric("memory/active", "GPU memory in active blocks (bytes)", ev.MEMORY, "active")
MEMORY_INACTIVE_SPLIT = metric("memory/inactive_split", "GPU memory in inactive split blocks (bytes)", ev.MEMORY,
                               "inactive_split")
MEMORY_ALLOC_RETRIES = metric("memory/alloc_retries", "GPU allocation retries", ev.MEMORY, "alloc_retries")
MEMORY_NUM_OOMS = metric("memory/num_ooms", "GPU out-of-memory errors", ev.MEMORY, "num_ooms")
MEMORY_FREE = metric("memory/free", "GPU memory free (bytes)", ev.MEMORY, "free")
MEMORY_TOTAL = metric("memory/total", "GPU memory total (bytes)", ev.MEMORY, "total")

INSPECT_PREFIX = "inspect/"   # inspect/<figure>/<node>: an inspected step's figures (trainer.inspection)


def carried_by(event: str) -> list[Metric]:
    """The metrics an event carries, in the table's order."""
    return [m for _, m in METRICS.items() if m.event == event]


def values(event: ev.Event) -> dict[str, float]:
    """An event's metrics by name (those it has a number for)."""
    out: dict[str, float] = {}
    for m in carried_by(event.event):
        v = getattr(event, m.field)
        if isinstance(v, int | float) and not isinstance(v, bool):
            out[m.name] = float(v)
    return out


def rows(event: ev.Event, step: int) -> list[tuple[int, str, float | None]]:
    """The run store's rows for an event's metrics at ``step``."""
    return [(step, name, v) for name, v in values(event).items()]


def fields(event: str, named: dict[str, float | None]) -> dict[str, float | None]:
    """The fields of ``event`` for metrics read by name (from the store): the inverse of :func:`values`."""
    return {m.field: named.get(m.name) for m in carried_by(event)}
