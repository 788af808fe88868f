"""Following a run that a worker trains outside this window (left going when the studio closed,
or started in a terminal): its curves, epochs and confusion matrix, read from the run store.

The worker writes every metric window and epoch report to the store before it emits the event,
so polling the store once a second shows the same figures the event stream would, a second late.
Pause, stop and the learning rate need the worker's stdin, which only the studio that started it
holds: those controls stay off, and the title says why.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from trainer.metrics import names
from trainer.protocol import events as ev
from trainer.spec import OptimSpec
from trainer.store.runs import RunStore, StoreError

from .dashboard import TrainingDashboard
from .memory_prediction import predicted_peak
from .tasks import BackgroundTask

POLL_MS = 1000
# the rows an epoch writes: its own (epoch/...) and the val split's, read together at its epoch_end
_EPOCH = frozenset(m.name for m in names.carried_by(ev.EPOCH_END))


class RunFollower(QObject):
    """Feeds ``dashboard`` from the store rows of run ``run_id`` until the run ends."""

    ended = Signal(str, str)  # status, message

    def __init__(self, store: RunStore, dashboard: TrainingDashboard, run_id: int, interval_ms: int = POLL_MS,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.store, self.dashboard, self.run_id = store, dashboard, run_id
        self._seen = 0                                    # metric rows shown (the store keeps their order)
        self._epoch_rows: dict[int, dict[str, float | None]] = defaultdict(dict)   # step -> epoch/*, val/*
        self._reports = 0                                 # epoch reports shown
        run = store.run(run_id)
        spec = run.spec if isinstance(run.spec, dict) else {}
        self._epochs = int(_get(spec, "train", "epochs") or 0)
        dashboard.begin_run(f"{run.name or 'run'}  \u00b7  run {run_id}  \u00b7  {run.device}  \u00b7  "
                            "training in the background", 0, _get(spec, "optim", "lr") or OptimSpec().lr)
        dashboard.set_controls_enabled(False)             # its stdin belongs to the studio that started it
        dashboard.set_state("running (followed from the run store)")
        self._peak_task = self._predict_peak(spec, run.graph, run.device or "cpu")
        self.timer = QTimer(self, interval=interval_ms)
        self.timer.timeout.connect(self.poll)
        self.timer.start()
        self.poll()

    def _predict_peak(self, spec: dict[str, Any], graph: Any, device: str) -> BackgroundTask | None:
        """The run's predicted peak as the memory plot's dashed line, as for a run this window started
        (computed on a thread from the stored spec and graph)."""
        if not isinstance(graph, dict) or not graph:    # no graph kept: nothing to predict
            return None
        full = {**spec, "model": {**(spec.get("model") or {}), "graph": graph}}
        task = BackgroundTask(lambda: predicted_peak(full, device), self)
        task.done.connect(lambda figures: self.dashboard.set_predicted_peak(*figures) if self.timer.isActive() else None)
        task.start()
        return task

    def stop(self) -> None:
        self.timer.stop()

    def poll(self) -> None:
        """Show what the worker stored since the last poll; at the run's end, say how it ended."""
        try:
            run = self.store.run(self.run_id)
            rows = self.store.metrics(self.run_id)
            reports = self.store.epoch_reports(self.run_id)
        except (StoreError, OSError, KeyError, LookupError):
            return
        self._show_steps(rows)
        self._show_epochs(reports)
        if run.status != "running":
            self.stop()
            message = run.status.replace("_", " ") + (f": {run.error}" if run.error else "")
            self.dashboard.set_state(message.splitlines()[0], running=False)
            self.ended.emit(run.status, message)

    def _show_steps(self, rows: list[tuple[int, str, float | None]]) -> None:
        """The rows stored since the last poll, by their order in the store, not by step: the worker writes
        a step's memory sample after that step's metrics (or a later step's), and reading on from the last
        step shown dropped those that came a poll late (2 of 6, or every one, of a followed run's memory)."""
        windows: dict[int, dict[str, float | None]] = defaultdict(dict)
        for step, name, value in rows[self._seen:]:
            if name in _EPOCH:
                self._epoch_rows[step][name] = value
            else:
                windows[step][name] = value
        self._seen = len(rows)
        for step in sorted(windows):
            self.dashboard.add_values(step, windows[step])     # the store's names are the curves' keys
            if names.TRAIN_LOSS.name in windows[step]:
                self.dashboard.clock.update(step)

    def _show_epochs(self, reports: list[dict[str, Any]]) -> None:
        ends = sorted(s for s, v in self._epoch_rows.items() if names.EPOCH_TRAIN_LOSS.name in v)  # one per epoch
        while self._reports < min(len(reports), len(ends)):
            report, step = reports[self._reports], ends[self._reports]
            # the epoch's event as the worker sent it: its metrics by the table, its report as stored
            event = ev.decode({"event": ev.EPOCH_END, "epoch": int(report.get("epoch", self._reports + 1)), "step": step,
                               **names.fields(ev.EPOCH_END, self._epoch_rows[step]),
                               **{k: report.get(k) for k in ("per_class", "confusion", "classes")}})
            if isinstance(event, ev.EpochEnd):
                self.dashboard.end_epoch(event)
            self._reports += 1
            if self._reports == 1 and self._epochs:       # the first epoch tells how many steps one takes
                total = step * self._epochs
                self.dashboard.clock.total = total
                self.dashboard.progress.setRange(0, max(total, 1))


def _get(spec: dict[str, Any], section: str, key: str) -> Any:
    block = spec.get(section)
    return block.get(key) if isinstance(block, dict) else None
