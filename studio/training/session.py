"""One training run from the studio: writes the spec, starts the worker, feeds the dashboard.

The session is the glue between :class:`~studio.training.bridge.WorkerBridge` (events as
signals) and :class:`~studio.training.dashboard.TrainingDashboard` (plots), and it answers the
confusion matrix's "which samples are in this cell?" by re-evaluating the newest checkpoint on
the validation split with CPU torch on a background thread (the worker's events carry the
matrix, not the sample indices; the GUI process never touches CUDA).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal

from trainer.protocol import events as ev

from .bridge import WorkerBridge
from .cell_samples import Ask, CellSamples
from .dashboard import TrainingDashboard
from .memory_prediction import predicted_peak
from .tasks import BackgroundTask


class TrainingSession(QObject):
    """Starts and follows one worker; ``ended(status, message)`` when it is over, however it ended."""

    ended = Signal(str, str)
    run_started = Signal(int)

    def __init__(self, dashboard: TrainingDashboard, db_url: str, work_dir: Path,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.dashboard = dashboard
        self.db_url = db_url
        self.work_dir = Path(work_dir)
        self.bridge = WorkerBridge(self)
        self.info = ev.RunStarted()
        self.spec: dict[str, Any] = {}
        self.status = "idle"
        self._step = 0
        self._memory_title = ""
        self._matrix: ev.EpochEnd | None = None          # the epoch whose confusion matrix is shown...
        self._checkpoints: dict[int, ev.Checkpoint] = {}   # ...and checkpoints from its step on, by step
        self._waiting: tuple[ev.EpochEnd, int, int] | None = None   # (matrix, true, predicted): a click waiting
        # for a checkpoint write; the samples of the cell clicked last, on the matrix shown or in the gallery
        self.samples = CellSamples(dashboard.confusion, self, shown=self._shows)
        self._peak_task: BackgroundTask | None = None
        self._given_peak: int | None = None
        self._given_unmodelled = 0
        self._connect()

    def _connect(self) -> None:
        b, d = self.bridge, self.dashboard
        b.run_started.connect(self._on_started)
        b.compile_progress.connect(d.compile_progress)
        b.compile_done.connect(lambda e: d.compile_done(e.seconds))
        b.metrics.connect(self._on_metrics)
        b.memory.connect(self._on_memory)
        b.epoch_end.connect(self._on_epoch)
        b.checkpoint.connect(self._on_checkpoint)
        b.memory_trace.connect(d.show_memory_trace)
        b.state_changed.connect(self._on_state)
        b.finished.connect(self._on_finished)
        b.failed.connect(self._on_failed)
        b.crashed.connect(self._on_crashed)
        b.exited.connect(self._no_write_coming)
        d.pause_requested.connect(b.pause)
        d.resume_requested.connect(b.resume)
        d.stop_requested.connect(self.stop)
        d.lr_requested.connect(b.set_lr)
        d.record_memory_requested.connect(self.record_memory)
        d.confusion.samples_requested.connect(self._load_samples)

    # ------------------------------------------------------------------ control
    def start(self, spec: dict[str, Any], predicted_peak: int | None = None, unmodelled: int = 0) -> int:
        """Write ``spec`` to a fresh launch folder and start the worker on it; returns the pid.
        ``predicted_peak``: the Train dialog's prediction for this very spec (bytes), drawn on the memory
        plot and handed to the worker's memory gate: the run is predicted once, not again here nor there;
        ``unmodelled``: the bytes it may be under (this CPU's bf16 kernels), said on the plot."""
        self.spec, self._given_peak, self._given_unmodelled = spec, predicted_peak, unmodelled
        folder = self.work_dir / time.strftime("%Y%m%d-%H%M%S")
        n = 1
        while folder.exists():
            folder = folder.with_name(f"{folder.name.split('.')[0]}.{n}")
            n += 1
        folder.mkdir(parents=True)
        spec_path = folder / "spec.json"
        spec_path.write_text(json.dumps(spec, indent=1) + "\n", encoding="utf-8")
        self.status = "starting"
        self._matrix, self._checkpoints, self._waiting = None, {}, None
        self.samples.forget()             # the last run's samples are not this one's
        self.dashboard.begin_run(spec.get("name") or "run", 0, spec.get("optim", {}).get("lr"))
        self.dashboard.set_state("starting worker...")
        return self.bridge.start(spec_path, self.db_url, folder / "worker.log", cwd=folder,
                                 predicted_peak=predicted_peak)

    def is_running(self) -> bool:
        """A run is going: the worker is alive and has not reported its end."""
        return self.bridge.is_running() and not self.bridge.ended

    def stop(self) -> None:
        if self.bridge.stop():
            self.dashboard.set_state("stopping...")

    def record_memory(self) -> bool:
        """Send the worker the record-memory command; False when no run is training."""
        if not self.is_running() or not self.bridge.record_memory():
            return False
        self.dashboard.recording_memory()
        return True

    def detach(self) -> None:
        """Leave the worker running alone (the studio is closing)."""
        self.bridge.detach()
        self.status = "detached"

    # ------------------------------------------------------------------ events
    def _on_started(self, e: ev.RunStarted) -> None:
        self.info = e
        self.status = "running"
        title = f"{e.name or 'run'}  \u00b7  run {e.run_id}  \u00b7  {e.device}"
        self.dashboard.begin_run(title, e.epochs * e.steps_per_epoch, self.spec.get("optim", {}).get("lr"))
        self.dashboard.clock.update(e.start_step)
        self.dashboard.set_state("running")
        if e.compile not in (None, "off"):
            self.dashboard.compile_started(e.compile_first_time, e.compile_expected_s)
        self._predict_peak(e)
        if e.run_id is not None:
            self.run_started.emit(e.run_id)

    def _predict_peak(self, e: ev.RunStarted) -> None:
        """The run's predicted peak for the memory plot: the worker's gate's, else the Train dialog's; only
        a run started with neither (a script, the dashboard's preview) is predicted here, on a thread."""
        peak, unmodelled = (e.predicted_peak, e.predicted_unmodelled or 0) if e.predicted_peak else \
            (self._given_peak, self._given_unmodelled)
        if peak:
            self._peak_task = None
            self.dashboard.set_predicted_peak(peak, unmodelled)
            return
        spec, device = dict(self.spec), e.device or "cpu"
        task = self._peak_task = BackgroundTask(lambda: predicted_peak(spec, device), self)
        task.done.connect(lambda figures, t=task: self.dashboard.set_predicted_peak(*figures)
                          if t is self._peak_task else None)
        task.start()

    def _on_metrics(self, e: ev.Metrics) -> None:
        self._step = e.step
        self.dashboard.add_metrics(e)

    def _on_memory(self, e: ev.Memory) -> None:
        title = f"Memory ({e.device or 'cuda'})" if e.cuda else "Memory (worker process RSS)"
        if title != self._memory_title:
            self._memory_title = title
            self.dashboard.set_memory_title(title)
        if e.step is not None:
            self._step = e.step
        self.dashboard.add_memory(e, self._step)

    def _on_epoch(self, e: ev.EpochEnd) -> None:
        self.dashboard.end_epoch(e, e.classes or self.info.classes)
        if e.confusion is not None:   # a click on an older matrix is still answered, in the gallery
            self._matrix = e
            self._checkpoints = {s: c for s, c in self._checkpoints.items() if s >= e.step}

    def _on_checkpoint(self, e: ev.Checkpoint) -> None:
        if e.step not in self._checkpoints or e.kind == "best":   # best and last of one step: the same weights
            self._checkpoints[e.step] = e
        # The write a click asked for, or a later one: the worker writes the copy it holds when the command
        # comes, which is a later epoch's where epochs are shorter than the way there.
        waiting = self._waiting
        if waiting is not None and e.step >= waiting[0].step:
            self._waiting = None
            self._ask(e, waiting[1], waiting[2])

    def _on_state(self, e: ev.State) -> None:
        if e.state in ("paused", "running"):
            self.dashboard.set_paused(e.state == "paused")
        else:
            self.dashboard.set_state(e.state)

    def _on_finished(self, e: ev.Finished) -> None:
        self.status = e.status
        acc = e.test_accuracy
        msg = f"{self.status.replace('_', ' ')}" + (f", test accuracy {acc:.4f}" if acc is not None else "")
        self.dashboard.set_state(msg, running=False)
        if self._matrix is None:
            held_out = self.spec.get("data", {}).get("val_fraction") != 0
            self.dashboard.confusion.none_coming(
                "No confusion matrix: the run ended\nbefore its first validation" if held_out else
                "No confusion matrix: this run trained\non train+val, with no validation split")
        self.ended.emit(self.status, msg)

    def _on_failed(self, e: ev.Failed) -> None:
        self.status = "failed"
        msg = f"failed ({e.kind}): {e.message}"
        self.dashboard.set_state(msg.splitlines()[0], running=False)
        self.ended.emit("failed", msg)

    def _on_crashed(self, reason: str) -> None:
        self.status = "failed"
        self.dashboard.set_state(f"failed: {reason.splitlines()[0]}", running=False)
        self.ended.emit("failed", reason)

    # ------------------------------------------------------------- predictions
    def _load_samples(self, t: int, p: int) -> None:
        """The samples of a cell: the re-evaluation of the checkpoint saved with the matrix shown."""
        matrix, self._waiting = self._matrix, None   # this click replaces one still waiting for a write
        ckpt = self._checkpoints.get(matrix.step) if matrix is not None else None
        if matrix is None or ckpt is None or not self.spec:
            self.samples.forget()         # an earlier click's samples would answer this one
            # The worker holds an epoch's copy between writes (checkpoints.every_s) when it keeps its last
            # checkpoint or the epoch was the best: asked, it writes it now, and the checkpoint event answers.
            if matrix is not None and (self.spec.get("checkpoints", {}).get("last", True) or matrix.best) \
                    and self.is_running() and self.bridge.write_checkpoints():
                self._waiting = (matrix, t, p)
                self.dashboard.confusion.show_message(
                    f"Saving the run's checkpoint (epoch {matrix.epoch} or later) for the samples...")
                return
            self.dashboard.confusion.show_message(
                "The samples appear once the run has saved a checkpoint." if matrix is None else
                f"The run saved no checkpoint of epoch {matrix.epoch} to show its samples from.")
            return
        self._ask(ckpt, t, p)

    def _ask(self, ckpt: ev.Checkpoint, t: int, p: int) -> None:
        self.samples.ask(Ask((ckpt.step, ckpt.path), dict(self.spec), ckpt.path,
                             f"{ckpt.kind} checkpoint, epoch {ckpt.epoch}", t, p))

    def _shows(self, source: Any) -> bool:
        """Whether the checkpoint an ask's source names (step, path) is of the matrix shown, or newer."""
        return self._matrix is None or source[0] >= self._matrix.step

    def _no_write_coming(self, _code: int = 0) -> None:
        """The worker exited: a click still waiting for a checkpoint gets none (the end's writes came first)."""
        if self._waiting is not None:
            epoch = self._waiting[0].epoch
            self._waiting = None
            self.dashboard.confusion.show_message(
                f"The run saved no checkpoint of epoch {epoch} or later to show its samples from.")

    def wait_predictions(self, ms: int = 60_000) -> bool:
        return self.samples.wait(ms)

    def wait_tasks(self, ms: int = 60_000) -> bool:
        """Wait for this session's threads (shutdown: a QThread must not be destroyed running)."""
        return self.samples.wait(ms) and (self._peak_task is None or self._peak_task.wait(ms))
