"""One run in progress: the model, optimizer, loaders and bookkeeping, and the epochs that drive them.

:func:`make_job` builds everything from a checked :class:`~trainer.checks.Setup`; :func:`run_epochs`
runs epochs until done, stopped or early-stopped. Checkpoints (saving off the training thread, and
the round trip that makes a resumed run end where an uninterrupted one would) are :mod:`.checkpoints.saving`.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import torch
from torch import nn

from graph_editor.building import build_module

from .callbacks import Callback
from .callbacks.reporting import MemorySamples, Reporter
from .checkpoints.saving import Checkpoints, Held, save, write_held
from .checks import Setup
from .compilation import recipes as warm
from .compilation.log import watch as watch_compile
from .compilation.progress import CompileProgress, cache_counts
from .data.images.prepare import file_loaders
from .data.loaders import Augment, DeviceLoader, StreamLoader, worker_context
from .finetune import freeze, initialise, lr_scales
from .inspection import LiveInspection, publisher
from .loop import (
    EpochTotals,
    Evaluation,
    Loop,
    StepFn,
    Window,
    evaluate,
    make_train_step,
    report_pending,
    train_one_epoch,
)
from .memory.recomputation import SegmentError, checkpointed_module
from .memory.timeline import LiveRecording
from .memory.timeline import publisher as memtrace_publisher
from .metrics import names
from .metrics.names import rows as metric_rows
from .metrics.recorder import Recorder
from .metrics.skipped import watch as watch_skipped
from .metrics.utilisation import DataWait
from .optim import Schedule, make_optimizer
from .protocol import events as ev
from .protocol.controls import Controls
from .spec import SpecError
from .store.runs import RunStore
from .threads import adaptive as adaptive_threads

LOWER_IS_BETTER = {"val_loss"}


@dataclass
class Job:
    setup: Setup
    store: RunStore
    emitter: ev.Emitter
    run_id: int
    run_dir: Path
    model: nn.Module          # the eager module: its state dict is what checkpoints hold
    runner: nn.Module         # what the loop calls: the model, or its compiled wrapper
    opt: torch.optim.Optimizer
    step_fn: StepFn
    scaler: torch.amp.GradScaler | None
    schedule: Schedule
    loaders: dict[str, DeviceLoader]
    controls: Controls
    window: Window
    step: int = 0
    epoch: int = 0            # epochs completed
    order: torch.Tensor | None = None   # the current epoch's shuffled order while it is in progress
    position: int = 0         # steps of the current epoch already done
    totals: EpochTotals = field(default_factory=EpochTotals)
    best: dict[str, list[float]] = field(default_factory=dict)  # metric -> [value, epoch]
    bad_epochs: int = 0
    last_memory: float = 0.0
    # The run's clock: the "time" metric's zero, this process's start less what the run trained before a
    # resume (the gap between a stop and its resume is not the run's time)
    started: float = field(default_factory=time.monotonic)
    last_cpu: tuple[float, float] = field(default_factory=lambda: (time.process_time(), time.monotonic()))
    recorder: Recorder = field(default_factory=Recorder)
    held: Held = field(default_factory=Held)   # checkpoint copies taken, not written yet (every_s)
    inspection: LiveInspection | None = None   # inspects a step on request or every inspect_every_s
    callbacks: list[Callback] = field(default_factory=list)   # the features plugged into the loop, in order
    dist: Any = None          # under torchrun: trainer.distributed.rank.RankRole (agreement, sharded checkpoints)

    @property
    def spec(self):  # noqa: ANN201 - RunSpec
        return self.setup.spec

    @functools.cached_property
    def spec_dict(self) -> dict[str, Any]:
        """The spec as every checkpoint keeps it, made once: it does not change while the run trains (each
        epoch's checkpoint copy made it again, 0.5 ms of the training thread)."""
        return self.spec.to_dict()

    def elapsed(self) -> float:
        """Seconds of the run so far, every part before a resume included."""
        return time.monotonic() - self.started

    def lr_at(self, step: int) -> float:
        override = self.controls.lr_override
        return override if override is not None else self.schedule.lr_at(step)


def build_model(setup: Setup) -> nn.Module:
    """The graph as a module on the device, in channels_last and fp8 form and with activation
    checkpointing when the spec asks.

    The seed is set first: the same spec always starts from the same weights."""
    torch.manual_seed(setup.spec.train.seed)
    model = build_module(setup.graph, device=setup.device)
    initialise(model, setup.graph, setup.spec)      # a pretrained start (model.init_from), if any
    freeze(model, setup.graph, setup.spec.model)
    try:   # activation checkpointing of the spec's segments; the same layers and parameters
        model = checkpointed_module(model, setup.graph, setup.spec.memory.checkpoint)
    except SegmentError as exc:
        raise SpecError([str(exc)]) from None
    p = setup.spec.precision
    if setup.channels_last:
        model = model.to(memory_format=torch.channels_last)
    if p.dtype == "fp8":
        from torchao.float8 import convert_to_float8_training

        if not any(fp8_eligible(m, name) for name, m in model.named_modules()):
            raise SpecError(["precision.dtype: fp8 trains Linear layers whose in and out features are both "
                             "multiples of 16, and this graph has none (use bf16)"])
        convert_to_float8_training(model, module_filter_fn=fp8_eligible)
    return model


def fp8_eligible(module: nn.Module, fqn: str) -> bool:
    """The layers fp8 training converts: Linear layers with both dimensions multiples of 16, the
    shapes the fp8 matrix product accepts. A small head (say 10 classes) stays in the model's dtype."""
    return isinstance(module, nn.Linear) and module.in_features % 16 == 0 and module.out_features % 16 == 0


def make_job(setup: Setup, model: nn.Module, *, store: RunStore, emitter: ev.Emitter, run_id: int,
             run_dir: Path, controls: Controls) -> Job:
    spec, dev = setup.spec, setup.device
    if dev.type == "cuda":
        torch.backends.cudnn.benchmark = True    # fixed batch shapes: cuDNN picks each layer's fastest kernel once
    compiled = spec.precision.compile != "off"
    opt = make_optimizer(model, spec.optim, lr_tensor=compiled, device=dev,
                         scales=lr_scales(model, setup.graph, spec.model))
    # torch.compile returns the module's compiled wrapper, typed as a plain callable: called as the module
    runner = cast(nn.Module, torch.compile(model, mode=spec.precision.compile)) if compiled else model
    step_fn, scaler = make_train_step(runner, opt, device=dev, precision=spec.precision.dtype,
                                      label_smoothing=spec.optim.label_smoothing, compile_mode=spec.precision.compile)
    loaders = start_loaders(make_loaders(setup))
    schedule = Schedule(spec.optim.lr, spec.schedule, loaders["train"].steps, spec.train.epochs)
    job = Job(setup, store, emitter, run_id, run_dir, model, runner, opt, step_fn, scaler, schedule, loaders,
              controls, Window())
    job.callbacks = core_callbacks(job)
    if compiled:
        job.step_fn = _timed_first_call(job, step_fn)
    # Inspection runs the eager model (a compiled backward is one opaque node) on the batch it takes.
    job.inspection = LiveInspection(
        model, opt, device=dev, precision=spec.precision.dtype, label_smoothing=spec.optim.label_smoothing,
        publish=publisher(run_dir, store, run_id, emitter.emit, lambda write: job.recorder.submit(write)),
        every_s=spec.train.inspect_every_s, scaler=lambda: job.scaler, start_step=lambda: job.step)
    controls.on_inspect = job.inspection.request
    watch_skipped(job)
    recording = LiveRecording(model, dev, publish=memtrace_publisher(run_dir, emitter.emit, job.recorder.submit),
                              start_step=lambda: job.step, opt=opt)
    controls.on_record_memory = recording.request
    controls.on_set_lr = lambda lr: record_lr_set(job, lr)
    controls.on_write_checkpoints = lambda: write_held(job)
    job.callbacks += [job.inspection, recording]
    adaptive = adaptive_threads.for_this_process()   # the thread count follows the machine's load
    if adaptive is not None and not compiled:   # compiled kernels keep the count they were compiled with
        job.callbacks.append(adaptive)
    for callback in job.callbacks:     # the inspection's wrapper inside the recording's
        job.step_fn = callback.wrap_step(job.step_fn)
    return job


class Commands(Callback):
    """The worker's commands (pause, resume, stop, set_lr, ...), read after every step."""

    def __init__(self, job: Job) -> None:
        self.controls = job.controls

    def on_step_end(self, step: int) -> bool:
        return self.controls.poll(step)


def core_callbacks(job: Job) -> list[Callback]:
    """What every run plugs into its loop, in the order they act at an epoch's end: its event, its
    checkpoints, a memory sample; the commands after each step, the metrics after each window."""
    return [Commands(job), Reporter(job), Checkpoints(job), MemorySamples(job)]


def make_loaders(setup: Setup) -> dict[str, DeviceLoader]:
    spec, s = setup.spec, setup.splits
    if s.on_disk:   # image files decoded per batch in the loaders' workers
        return dict(file_loaders(spec, s, setup.device, channels_last=setup.channels_last))
    aug = Augment(spec.data.augment.flip, spec.data.augment.translate)
    cl, seed = setup.channels_last, spec.train.seed
    out: dict[str, DeviceLoader] = {}
    for name in ("train", "val", "test"):
        split, train = s.memory_split(name), name == "train"
        if setup.streamed:
            out[name] = StreamLoader(split, spec.train.batch_size, setup.device, train=train, mean=s.mean, std=s.std,
                                     workers=spec.data.workers, augment=aug, channels_last=cl, seed=seed)
        else:
            out[name] = DeviceLoader(split, spec.train.batch_size, setup.device, train=train, augment=aug,
                                     channels_last=cl, seed=seed)
    return out


def start_loader_helper(setup: Setup) -> None:
    """Start the process the loaders' workers fork from (:func:`~.data.loaders.worker_context`) as soon as
    the run knows it streams its data: its imports (torch, torchvision) then overlap the memory check and
    the model's build, instead of the first batch waiting for them."""
    if setup.streamed and setup.spec.data.workers > 0:
        worker_context()


def start_loaders(loaders: dict[str, DeviceLoader]) -> dict[str, DeviceLoader]:
    """Start every loader's workers now, on threads (:class:`~.data.loaders.WorkerStart`): they come up
    while the run's first steps are prepared (and val/test's while the first epoch trains)."""
    for loader in loaders.values():
        loader.start()
    return loaders


def _timed_first_call(job: Job, step_fn: StepFn) -> StepFn:
    """Time the first (compiling) step, report what it compiles while it does, and the time it took;
    later calls pass straight through. The compile caches then hold this recipe (:mod:`.compilation.warm`)."""
    done = False
    log = watch_compile(job.emitter, job.model)   # dynamo's graph breaks and recompiles, as events

    def timed(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        nonlocal done
        if done:
            return step_fn(x, y)
        t0, (hits0, misses0) = time.perf_counter(), cache_counts()
        progress = CompileProgress(job.emitter.emit).start()
        try:
            out = step_fn(x, y)
            if job.setup.device.type == "cuda":
                torch.cuda.synchronize(job.setup.device)   # once: the compile time must include the kernels
        finally:
            progress.close()
        seconds, (hits, misses) = time.perf_counter() - t0, cache_counts()
        job.emitter.emit(ev.CompileDone(seconds=round(seconds, 3), mode=job.spec.precision.compile,
                                        graph_breaks=log.breaks, recompiles=log.recompiles,
                                        cache_hits=hits - hits0, cache_misses=misses - misses0))
        warm.index().mark(warm.setup_key(job.setup), seconds, job.spec.name or "run")
        done = True
        return out

    return timed


def run_epochs(job: Job) -> str:
    """Train until the spec's epochs are done; returns 'completed', 'stopped' or 'early_stopped'."""
    spec, train = job.spec, job.loaders["train"]
    loop = Loop(lr_at=job.lr_at, callbacks=job.callbacks, interval_s=spec.train.metrics_interval_s,
                agree=job.dist.agree if job.dist else None)
    while job.epoch < spec.train.epochs:
        epoch, t0, paused0 = job.epoch + 1, time.perf_counter(), job.controls.paused_seconds
        if job.order is None:
            job.order, job.position, job.totals = train.order(), 0, EpochTotals()
        wait = DataWait()      # the host's seconds inside the loader's next(): its workers behind, or its own part
        step, stopped = train_one_epoch(job.step_fn, job.opt, wait.wrap(train.batches(job.order, job.position)),
                                        epoch=epoch, step=job.step, batch_size=spec.train.batch_size,
                                        window=job.window, totals=job.totals, loop=loop)
        job.position, job.step = job.position + step - job.step, step
        if stopped:
            save(job, "last")
            return "stopped"
        job.order, job.epoch = None, epoch
        if epoch == spec.train.epochs:
            _report_the_rest(job, loop)  # before the last epoch_end
        seconds = time.perf_counter() - t0 - (job.controls.paused_seconds - paused0)   # a pause is not training
        if end_of_epoch(job, epoch, seconds, wait.seconds):
            _report_the_rest(job, loop)
            return "early_stopped"
        if _poll(job):
            _report_the_rest(job, loop)
            if not spec.checkpoints.last:
                save(job, "last")
            return "stopped"
    return "completed"


def _poll(job: Job) -> bool:
    stop = job.controls.poll(job.step)
    return job.dist.agree(stop, False)[0] if job.dist else stop


def _report_the_rest(job: Job, loop: Loop) -> None:
    """The run ends after this epoch: report the steps its last window still holds."""
    report_pending(job.window, loop, job.step, job.epoch, job.lr_at(max(job.step - 1, 0)),
                   job.spec.train.batch_size)


def end_of_epoch(job: Job, epoch: int, seconds: float, waited: float = 0.0) -> bool:
    """Evaluate, store, checkpoint and report an epoch (``waited``: its seconds spent getting batches, stored
    as the share ``data/wait``); True when early stopping ends the run."""
    spec = job.spec
    job.recorder.check()        # a write of the last epoch that failed fails the run here
    val = evaluate_split(job, "val")
    values = {"val_accuracy": val.accuracy, "val_loss": val.loss} if val else {}
    improved = {name: _improves(job, name, v, epoch) for name, v in values.items()}
    best_metric = spec.checkpoints.metric
    per_class = val.per_class() if val else None
    event = ev.EpochEnd(epoch=epoch, step=job.step, train_loss=job.totals.loss, train_accuracy=job.totals.accuracy,
                        val_loss=val.loss if val else None, val_accuracy=val.accuracy if val else None,
                        lr=job.lr_at(job.step), seconds=round(seconds, 3), best=bool(improved.get(best_metric)),
                        per_class=ev.PerClass.from_dict(per_class) if per_class else None,
                        confusion=val.confusion.tolist() if val else None,
                        classes=[str(c) for c in job.setup.splits.classes] if val else None)
    report = {"per_class": per_class, "confusion": event.confusion, "classes": event.classes} if val else {}
    best = job.best.get(best_metric)
    step, best_value = job.step, best[0] if best else None
    rows = [*metric_rows(event, step), (step, names.DATA_WAIT.name, waited / max(seconds, 1e-9))]
    # One transaction, on the recorder thread after the epoch's metrics; its event, checkpoints and memory
    # sample follow it there (the callbacks below submit them), so a reader that sees the event finds the rows.
    # The recorder starts on them once the callbacks' copies are taken (Recorder.batch).
    with job.recorder.batch():
        job.recorder.submit(lambda: job.store.record_epoch(
            job.run_id, rows, {**report, "step": step},    # the report names the weights it judged
            epoch=epoch, step=step, best_metric=best_metric, best_value=best_value))
        stop_metric = spec.early_stopping.metric
        job.bad_epochs = 0 if improved.get(stop_metric, True) else job.bad_epochs + 1   # before a checkpoint keeps it
        for callback in job.callbacks:      # the event, the checkpoints, a memory sample
            callback.on_epoch_end(event)
    return 0 < spec.early_stopping.patience <= job.bad_epochs


def _improves(job: Job, name: str, value: float, epoch: int) -> bool:
    best = job.best.get(name)
    delta = job.spec.early_stopping.min_delta
    better = best is None or (value < best[0] - delta if name in LOWER_IS_BETTER else value > best[0] + delta)
    if better:
        job.best[name] = [value, epoch]
    return better


def evaluate_split(job: Job, name: str) -> Evaluation | None:
    loader = job.loaders[name]
    if loader.n == 0:
        return None
    return evaluate(job.runner, loader, len(job.setup.splits.classes), device=job.setup.device,
                    precision=job.spec.precision.dtype, reduce=job.dist.sum_over_ranks if job.dist else None)


def record_lr_set(job: Job, lr: float) -> None:
    """A learning rate set by hand (the ``set_lr`` command), kept with the run as the metric ``lr/set``
    at the step it takes effect: the run's details say when the schedule was overridden."""
    step = job.step
    job.recorder.submit(lambda: job.store.add_metrics(job.run_id, [(step, names.LR_SET.name, lr)]))
