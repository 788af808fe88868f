"""Training in the main window: the Run menu, the toolbar's Train button (the one Train action,
Ctrl+T) and the Train and Runs workspaces from the start, the training parts on first use. It
plugs in through the window's :class:`~studio.port.StudioPort`, installed by ``studio.app.build``.

The training side (``studio.training``: run store, dashboard, runs dock) costs seconds of
imports (SQLAlchemy, pyqtgraph), so the window shows without it: the first Train command or the
first switch to the Train or Runs workspace builds the :class:`TrainingController` and docks it,
hands the runs dock the window's prompts and keeps the plots in the window's theme.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, QTimer
from PySide6.QtGui import QAction

from ..actions import ActionSpec
from ..port import StudioPort, shortcut_text
from ..warmup import warm_up
from .plot_theme import apply_plot_theme

if TYPE_CHECKING:
    from PySide6.QtWidgets import QDockWidget

    from ..themes import Theme
    from .controller import TrainingController

RUN_MENU = "&Run"
TRAIN = ActionSpec("train", "&Train…", RUN_MENU, "Ctrl+T", "train", True,
                   "Train the graph being edited in a background worker process")
RUNS = ActionSpec("runs", "&Runs", RUN_MENU, "Ctrl+Shift+R", "", False,
                  "Every run kept in the run store: compare, reopen a run's graph")
RECORDING = "Recording the memory of the next two training steps..."
RECORD_MEMORY = ActionSpec("record_memory", "Record &Memory Timeline", RUN_MENU, "Ctrl+Shift+M", "", False,
                           "Record every allocation of the running job's next two training steps by graph node "
                           "(Train workspace, Memory timeline tab; a click on a band selects its node)")


class TrainingHook(QObject):
    """Run > Train… and Run > Runs, backed by a TrainingController built when first needed."""

    def __init__(self, port: StudioPort, db_url: str | None = None, work_dir: Path | None = None) -> None:
        super().__init__(port.owner)
        self.port = port
        self.db_url, self.work_dir = db_url, work_dir
        self._controller: TrainingController | None = None
        self.current_run: int | None = None  # the last run started from this window (exports use it)
        self.train_action: QAction = port.add_action(TRAIN, self.train)   # the one Train: menu, toolbar, Ctrl+T
        self.runs_action: QAction = port.add_action(RUNS, self.show_runs)
        self.record_action: QAction = port.add_action(RECORD_MEMORY, self.record_memory)
        self.menu = port.menu(RUN_MENU)
        port.workspaces.add("Train", docks=lambda: self._docks("dashboard"),
                            tip="The run being trained: live curves, epochs, confusion matrix")
        port.workspaces.add("Runs", docks=lambda: self._docks("runs"),
                            tip="Every run kept: compare, details, reopen a run's graph")
        port.add_close_guard(self.close_guard)

    def _docks(self, which: str) -> list[QDockWidget]:
        """The controller's dashboard or runs dock (building the controller, which docks both)."""
        ctl = self.controller()
        dock = ctl.dashboard_dock if which == "dashboard" else ctl.runs_dock
        return [dock] if dock is not None else []

    @property
    def built(self) -> bool:
        return self._controller is not None

    def built_controller(self) -> TrainingController | None:
        """The training controller if it is built already (None: nothing trained or shown yet)."""
        return self._controller

    def last_dataset(self) -> str | None:
        """The dataset the Train dialog would start from (the last run's), or None when nothing ran yet."""
        return self._controller.last_dataset() if self._controller is not None else None

    def train_hint(self) -> str:
        """How to start a run, naming the Train action's shortcut."""
        keys = shortcut_text(self.train_action)
        return f"Train ({keys}) starts one" if keys else "Run > Train starts one"

    def controller(self) -> TrainingController:
        """The training controller, built and docked on the first call."""
        if self._controller is None:
            from .controller import TrainingController  # seconds of imports: only when asked for

            port = self.port

            def open_graph(graph: dict[str, Any], title: str) -> None:
                if port.open_snapshot(graph, title):
                    port.workspaces.show("Design")     # where the opened graph is seen and edited
            ctl = TrainingController(lambda: port.graph, db_url=self.db_url, work_dir=self.work_dir,
                                     open_graph=open_graph, prompts=port.prompts,
                                     graph_name=lambda: port.run_source, parent=self)
            self._controller = ctl
            ctl.install(port.add_hidden_dock, port.status)
            ctl.reveal = port.workspaces.reveal
            if ctl.follower is None:   # the dashboard's hint names the one Train action
                ctl.dashboard.title.setText(f"No run yet: {self.train_hint()}")
            for name in ("Train", "Runs"):   # their docks exist now: a run's dashboard is revealed in Train
                port.workspaces.docks(name)
            port.theme_changed.connect(self._on_theme)
            self._on_theme(port.theme)
            ctl.session.run_started.connect(self._on_run_started)
            timeline = ctl.dashboard.timeline      # its bands and the canvas select each other
            timeline.node_clicked.connect(self._select_node)
            port.selection_changed.connect(timeline.highlight)
            ctl.run_ended.connect(self._on_run_ended)
            ctl.dashboard.memory_trace_shown.connect(lambda error: self._recording_over(
                f"Memory not recorded: {error}" if error else "Memory recorded: the Memory timeline tab shows it by layer"))
            ctl.run_ended.connect(lambda *_: self._recording_over())
            port.owner.destroyed.connect(ctl.shutdown)
        return self._controller

    def _on_theme(self, theme: Theme) -> None:
        apply_plot_theme(self.port.owner, theme.name)  # the dashboard's and the runs dock's plots, open dialogs'

    def _on_run_started(self, run_id: int) -> None:
        self.current_run = run_id

    def _on_run_ended(self, status: str, message: str) -> None:
        level = "info" if status in ("completed", "early_stopped", "stopped") else "warning"
        self.port.log(f"Run {status}: {message}".rstrip(": "), level)

    def train(self) -> None:
        self.controller().open_train_dialog(self.port.owner)

    def record_memory(self) -> None:
        """Run > Record Memory Timeline: the running job records its next steps; the Train workspace shows them."""
        ctl = self.controller()
        if not ctl.session.record_memory():
            self.port.status(f"No run is training: {self.train_hint()}.")
            return
        ctl.show_dashboard()
        self.port.status(RECORDING, 0)     # until the recording arrives or the run ends

    def _recording_over(self, text: str = "") -> None:
        """The status line that said a recording was under way says how it went (or goes)."""
        if self.port.status_text() == RECORDING:
            self.port.status(text, 8000) if text else self.port.clear_status()

    def _select_node(self, node_id: str) -> None:
        """A timeline band was clicked: select its node on the canvas (shown in Design and Inspect)."""
        if node_id not in self.port.graph.nodes:
            self.port.status(f"{node_id} is not in the graph being edited")
            return
        self.port.reveal(node_id)
        self.port.status(f"{node_id} selected on the canvas")

    def show_runs(self) -> None:
        self.port.workspaces.show("Runs")

    def close_guard(self) -> bool:
        """The window may close: no training built, or no run going, or the user chose."""
        ctl, owner = self._controller, self.port.owner
        return ctl is None or ctl.close_request(owner, ask=lambda: self.port.prompts.running_run(owner))

    def reopen_docks(self, workspace: str | None, after: threading.Thread | None = None) -> threading.Thread | None:
        """At start: when the studio closed in the Train or Runs ``workspace``, import the training
        side on a thread (seconds: SQLAlchemy, pyqtgraph), then build it and show that workspace as
        it was left. The window stays usable meanwhile; a Train or Runs command before then just
        waits for the import."""
        if self.built or workspace not in ("Train", "Runs"):
            return None
        thread = warm_up("studio.training.controller", after=after)
        timer = QTimer(self, interval=50)

        def when_loaded() -> None:
            if not thread.is_alive():
                timer.stop()
                self.port.workspaces.show(workspace)
        timer.timeout.connect(when_loaded)
        timer.start()
        return thread
