"""What the main window installs for training: the dashboard and the runs docks (the Train and
Runs workspaces show them), the session and the Train dialog.

Built on first use by :class:`studio.training.hook.TrainingHook` (which owns the one Train action)
and docked in the window it is given; it owns the run store connection, the current
:class:`TrainingSession` and the dialogs, and answers the window's close request when a run is
going (stop it, or let it finish in the background).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QEventLoop, QObject, QTimer, Signal
from PySide6.QtWidgets import QDockWidget, QWidget

from graph_editor.model.graph import Graph
from trainer.run_outcome import default_run_name
from trainer.store.runs import RunStore, StoreError, default_run_root, default_url

from ..prompts import Prompts, ask_about_running_run
from .dashboard import TrainingDashboard
from .devices import Device, available_devices
from .follow import RunFollower
from .runs_dock import RunsPanel
from .session import TrainingSession
from .train_dialog import TrainDialog

STOP, BACKGROUND, CANCEL = "stop", "background", "cancel"


class TrainingController(QObject):
    """The Train dialog, the dashboard and the runs dock (the Train action is the hook's).
    ``graph_provider()`` gives the graph being edited."""

    run_ended = Signal(str, str)

    def __init__(self, graph_provider: Callable[[], Graph], *, db_url: str | None = None,
                 work_dir: Path | None = None, open_graph: Callable[[dict[str, Any], str], None] | None = None,
                 devices: list[Device] | None = None, prompts: Prompts | None = None,
                 graph_name: Callable[[], str] | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.graph_provider = graph_provider
        self.graph_name = graph_name or (lambda: "")
        self._recipe: dict[str, Any] = {}
        self.db_url = db_url or default_url()
        self.store = RunStore(self.db_url)
        self.work_dir = work_dir or default_run_root().parent / "launches"
        self._devices = devices
        self.dashboard = TrainingDashboard()
        self.runs = RunsPanel(self.store, open_graph, prompts=prompts)   # its delete asks through the window
        self.session = TrainingSession(self.dashboard, self.db_url, self.work_dir, self)
        self.session.ended.connect(self._on_ended)
        self.session.run_started.connect(lambda _id: self.runs.refresh())
        self.follower: RunFollower | None = None
        self.follow_background()
        self._status: Callable[[str, int], None] = lambda _text, _ms: None   # the window's status bar, once installed
        self.reveal: Callable[[QDockWidget], None] = _raise  # the window's workspaces switch to the dock
        self.dashboard_dock: QDockWidget | None = None
        self.runs_dock: QDockWidget | None = None

    def devices(self) -> list[Device]:
        """GPUs (from nvidia-smi, never CUDA here) and the CPU; looked up once."""
        if self._devices is None:
            self._devices = available_devices()
        return self._devices

    def install(self, add_dock: Callable[[QDockWidget], None], status: Callable[[str, int], None] | None = None) -> None:
        """Make the Training and Runs docks and hand each to ``add_dock``, which docks it hidden (the Train
        and Runs workspaces show them, each filling the window there, in the layout the user left them
        in); ``status(text, ms)`` shows a line in the window's status bar."""
        self._status = status or self._status
        self.dashboard_dock = _dock("Training", "training_dock", self.dashboard)
        self.runs_dock = _dock("Runs", "runs_dock", self.runs)
        for dock in (self.dashboard_dock, self.runs_dock):
            add_dock(dock)

    # ------------------------------------------------------------------ runs
    def open_train_dialog(self, parent: QWidget | None = None) -> TrainDialog | None:
        """Show the Train dialog for the current graph; start the run when accepted. While a run is
        going, its dashboard comes forward instead and the status bar says why."""
        if self.session.is_running():
            self.show_dashboard()
            self._status("A run is going: stop it before starting another.", 6000)
            return None
        recipe = {k: v for k, v in self._recipe.items() if k != "name"}   # a name is one run's, not the recipe's
        dialog = TrainDialog(self.graph_provider().copy(), self.devices(), parent, initial=recipe or None)
        dialog.accepted.connect(lambda: self.start(dialog.spec(), dialog.predicted_peak(), dialog.predicted_unmodelled()))
        dialog.open()
        return dialog

    def last_dataset(self) -> str | None:
        """The dataset of the last run started here (the next Train dialog starts from it), or None."""
        data = self._recipe.get("data")
        dataset = data.get("dataset") if isinstance(data, dict) else None
        return str(dataset) if dataset else None

    def follow_background(self) -> int | None:
        """Show the newest run a worker is training outside this window (left going when the studio
        last closed, or started in a terminal) live in the dashboard; returns its id, or None."""
        try:
            running = [r.id for r in self.store.runs() if r.status == "running"]
        except (StoreError, OSError):
            return None
        if not running or self.session.is_running():
            return None
        if self.follower is not None:
            self.follower.stop()
        self.follower = RunFollower(self.store, self.dashboard, max(running), parent=self)
        self.follower.ended.connect(self._on_ended)
        return max(running)

    def start(self, spec: dict[str, Any], predicted_peak: int | None = None, unmodelled: int = 0) -> int:
        """Start a worker on ``spec`` and bring the dashboard forward; returns the worker's pid. A run
        the user did not name is named after its graph ("Untitled" for a graph not saved yet).
        ``predicted_peak``: the dialog's prediction for ``spec`` (bytes), shown instead of predicting again;
        ``unmodelled``: the bytes it may be under (this CPU's bf16 kernels)."""
        self._recipe = spec             # the next Train dialog starts from it (the graph may be another)
        if self.follower is not None:   # the dashboard shows this run from now on
            self.follower.stop()
            self.follower = None
        if not spec.get("name"):
            spec = {**spec, "name": run_name(self.graph_name())}
        pid = self.session.start(spec, predicted_peak, unmodelled)
        self.show_dashboard()
        return pid

    def show_dashboard(self) -> None:
        if self.dashboard_dock is not None:
            self.reveal(self.dashboard_dock)

    def _on_ended(self, status: str, message: str) -> None:
        self.runs.refresh()
        self.run_ended.emit(status, message)

    # ----------------------------------------------------------------- close
    def close_request(self, parent: QWidget | None = None, ask: Callable[[], str] | None = None,
                      stop_timeout_ms: int = 15_000) -> bool:
        """Called from the window's closeEvent: True when the window may close."""
        if not self.session.is_running():
            return True
        choice = ask() if ask else ask_about_running_run(parent)
        if choice == CANCEL:
            return False
        if choice == BACKGROUND:
            self.session.detach()
            return True
        self.session.stop()
        if not _wait_exit(self.session, stop_timeout_ms):
            self.session.bridge.terminate()
        return True

    def shutdown(self) -> None:
        self.runs.timer.stop()
        self.session.wait_tasks()
        self.store.close()


def _wait_exit(session: TrainingSession, ms: int) -> bool:
    """Run the event loop until the worker exits (it checkpoints first) or ``ms`` pass."""
    if not session.is_running():
        return True
    loop = QEventLoop()
    session.bridge.exited.connect(loop.quit)
    QTimer.singleShot(ms, loop.quit)
    loop.exec()
    return not session.is_running()


def run_name(document_name: str) -> str:
    """``lenet5.graph.json`` -> ``lenet5``; an untitled graph's run is "Untitled", as the window calls
    the graph (the worker's own default, the spec file's name, means nothing to the user). The same
    rule as the command line's (:func:`trainer.run_outcome.default_run_name`)."""
    return default_run_name(document_name)


def _raise(dock: QDockWidget) -> None:
    dock.show()
    dock.raise_()


def _dock(title: str, name: str, widget: QWidget) -> QDockWidget:
    dock = QDockWidget(title)
    dock.setObjectName(name)
    dock.setWidget(widget)
    return dock
