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

from .bridge import WorkerBridge
from .dashboard import TrainingDashboard
from .tasks import BackgroundTask, predict_checkpoint


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
        self.info: dict[str, Any] = {}
        self.spec: dict[str, Any] = {}
        self.status = "idle"
        self._step = 0
        self._memory_title = ""
        self._checkpoint: dict[str, Any] | None = None
        self._predict_task: BackgroundTask | None = None
        self._connect()

    def _connect(self) -> None:
        b, d = self.bridge, self.dashboard
        b.run_started.connect(self._on_started)
        b.compile_done.connect(lambda e: d.compile_done(e.get("seconds")))
        b.metrics.connect(self._on_metrics)
        b.memory.connect(self._on_memory)
        b.epoch_end.connect(self._on_epoch)
        b.checkpoint.connect(self._on_checkpoint)
        b.state_changed.connect(self._on_state)
        b.finished.connect(self._on_finished)
        b.failed.connect(self._on_failed)
        b.crashed.connect(self._on_crashed)
        d.pause_requested.connect(b.pause)
        d.resume_requested.connect(b.resume)
        d.stop_requested.connect(self.stop)
        d.lr_requested.connect(b.set_lr)
        d.confusion.samples_requested.connect(self._load_samples)

    # ------------------------------------------------------------------ control
    def start(self, spec: dict[str, Any]) -> int:
        """Write ``spec`` to a fresh launch folder and start the worker on it; returns the pid."""
        self.spec = spec
        folder = self.work_dir / time.strftime("%Y%m%d-%H%M%S")
        n = 1
        while folder.exists():
            folder = folder.with_name(f"{folder.name.split('.')[0]}.{n}")
            n += 1
        folder.mkdir(parents=True)
        spec_path = folder / "spec.json"
        spec_path.write_text(json.dumps(spec, indent=1) + "\n", encoding="utf-8")
        self.status = "starting"
        self._checkpoint = None
        self.dashboard.begin_run(spec.get("name") or "run", 0, spec.get("optim", {}).get("lr"))
        self.dashboard.set_state("starting worker...")
        return self.bridge.start(spec_path, self.db_url, folder / "worker.log", cwd=folder)

    def is_running(self) -> bool:
        """A run is going: the worker is alive and has not reported its end."""
        return self.bridge.is_running() and not self.bridge.ended

    def stop(self) -> None:
        if self.bridge.stop():
            self.dashboard.set_state("stopping...")

    def detach(self) -> None:
        """Leave the worker running alone (the studio is closing)."""
        self.bridge.detach()
        self.status = "detached"

    # ------------------------------------------------------------------ events
    def _on_started(self, e: dict[str, Any]) -> None:
        self.info = e
        self.status = "running"
        total = int(e.get("epochs", 0)) * int(e.get("steps_per_epoch", 0))
        title = f"{e.get('name') or 'run'}  \u00b7  run {e.get('run_id')}  \u00b7  {e.get('device')}"
        self.dashboard.begin_run(title, total, self.spec.get("optim", {}).get("lr"))
        self.dashboard.clock.update(int(e.get("start_step", 0)))
        self.dashboard.set_state("running")
        if e.get("compile") not in (None, "off"):
            self.dashboard.compile_started()
        if e.get("run_id") is not None:
            self.run_started.emit(int(e["run_id"]))

    def _on_metrics(self, e: dict[str, Any]) -> None:
        self._step = int(e.get("step", self._step))
        self.dashboard.add_metrics(self._step, e)

    def _on_memory(self, e: dict[str, Any]) -> None:
        cuda = "allocated" in e
        keys = ("allocated", "reserved", "peak") if cuda else ("rss", "peak_rss")
        title = f"Memory ({e.get('device', 'cuda')})" if cuda else "Memory (worker process RSS)"
        if title != self._memory_title:
            self._memory_title = title
            self.dashboard.plots["memory"].getPlotItem().setTitle(title)
        self._step = int(e.get("step", self._step))
        self.dashboard.add_memory(self._step, {k: e[k] for k in keys if e.get(k) is not None})

    def _on_epoch(self, e: dict[str, Any]) -> None:
        self.dashboard.end_epoch(int(e["epoch"]), int(e.get("step", self._step)), e, e.get("confusion"),
                                 self.info.get("classes", ()))

    def _on_checkpoint(self, e: dict[str, Any]) -> None:
        self._checkpoint = e

    def _on_state(self, e: dict[str, Any]) -> None:
        state = e.get("state")
        if state in ("paused", "running"):
            self.dashboard.set_paused(state == "paused")
        else:
            self.dashboard.set_state(str(state))

    def _on_finished(self, e: dict[str, Any]) -> None:
        self.status = str(e.get("status", "completed"))
        acc = e.get("test_accuracy")
        msg = f"{self.status.replace('_', ' ')}" + (f", test accuracy {acc:.4f}" if acc is not None else "")
        self.dashboard.set_state(msg, running=False)
        self.ended.emit(self.status, msg)

    def _on_failed(self, e: dict[str, Any]) -> None:
        self.status = "failed"
        msg = f"failed ({e.get('kind', 'error')}): {e.get('message', '')}"
        self.dashboard.set_state(msg.splitlines()[0], running=False)
        self.ended.emit("failed", msg)

    def _on_crashed(self, reason: str) -> None:
        self.status = "failed"
        self.dashboard.set_state(f"failed: {reason.splitlines()[0]}", running=False)
        self.ended.emit("failed", reason)

    # ------------------------------------------------------------- predictions
    def _load_samples(self, t: int, p: int) -> None:
        ckpt = self._checkpoint
        if ckpt is None or not self.spec:
            self.dashboard.confusion.gallery.show_message(
                "The samples appear once the run has saved a checkpoint.")
            return
        if self._predict_task is not None and self._predict_task.is_running():
            return
        spec, path = dict(self.spec), ckpt["path"]
        self._predict_task = BackgroundTask(lambda: predict_checkpoint(spec, path), self)
        self._predict_task.done.connect(lambda r: self._show_predictions(r, ckpt, t, p))
        self._predict_task.error.connect(self.dashboard.confusion.gallery.show_message)
        self._predict_task.start()

    def _show_predictions(self, result: Any, ckpt: dict[str, Any], t: int, p: int) -> None:
        self.dashboard.confusion.show_predictions(result, f"{ckpt.get('kind')} checkpoint, epoch {ckpt.get('epoch')}",
                                                  t, p)

    def wait_predictions(self, ms: int = 60_000) -> bool:
        return self._predict_task.wait(ms) if self._predict_task else True
