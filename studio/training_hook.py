"""Training in the main window: the Run menu, the toolbar's Train button and the Train and Runs
workspaces from the start, the training parts on first use.

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
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMenu

from .training.plot_theme import apply_plot_theme
from .warmup import warm_up

if TYPE_CHECKING:
    from .main_window import MainWindow
    from .themes import Theme
    from .training.controller import TrainingController


class TrainingHook(QObject):
    """Run > Train… and Run > Runs, backed by a TrainingController built when first needed."""

    def __init__(self, window: MainWindow, db_url: str | None = None, work_dir: Path | None = None) -> None:
        super().__init__(window)
        self.window = window
        self.db_url, self.work_dir = db_url, work_dir
        self._controller: TrainingController | None = None
        self.current_run: int | None = None  # the last run started from this window (exports use it)
        self.menu = QMenu("&Run", window)
        view = window.menus["&View"]
        window.menuBar().insertMenu(view.menuAction(), self.menu)
        self.train_action = self._action("&Train…", "Ctrl+T", "Train the graph being edited in a background "
                                         "worker process", self.train)
        self.train_action.setObjectName("action_train")
        self.train_action.setIcon(window.s.icons.icon("train"))
        self.runs_action = self._action("&Runs", "Ctrl+Shift+R", "Every run kept in the run store: compare, "
                                        "reopen a run's graph", self.show_runs)
        self.record_action = self._action("Record &Memory Timeline", "Ctrl+Shift+M", "Record every allocation of the "
                                          "running job's next two training steps by graph node (Train workspace, "
                                          "Memory timeline tab; a click on a band selects its node)",
                                          self.record_memory)
        self.record_action.setObjectName("action_record_memory")
        window.toolbar.addSeparator()
        window.toolbar.addAction(self.train_action)
        window.workspaces.add("Train", docks=lambda: [self.controller().dashboard_dock],
                              tip="The run being trained: live curves, epochs, confusion matrix")
        window.workspaces.add("Runs", docks=lambda: [self.controller().runs_dock],
                              tip="Every run kept: compare, details, reopen a run's graph")
        window.s.themes.changed.connect(lambda _t: self.train_action.setIcon(window.s.icons.icon("train")))
        window.add_close_guard(self.close_guard)

    def _action(self, text: str, keys: str, tip: str, slot: Any) -> QAction:
        action = QAction(text, self.window, shortcut=QKeySequence(keys), statusTip=tip, toolTip=tip)
        action.triggered.connect(slot)
        self.menu.addAction(action)
        return action

    @property
    def built(self) -> bool:
        return self._controller is not None

    def controller(self) -> TrainingController:
        """The training controller, built and docked on the first call."""
        if self._controller is None:
            from .training.controller import TrainingController  # seconds of imports: only when asked for

            self._controller = TrainingController(lambda: self.window.controller.graph, db_url=self.db_url,
                                                  work_dir=self.work_dir, open_graph=self.window.files.open_snapshot,
                                                  prompts=self.window.s.prompts,
                                                  graph_name=lambda: self.window.document.name, parent=self)
            self._controller.install(self.window)
            self._controller.reveal = self.window.workspaces.reveal
            for name in ("Train", "Runs"):   # their docks exist now: a run's dashboard is revealed in Train
                self.window.workspaces.docks(name)
            self.window.s.themes.changed.connect(self._on_theme)
            self._on_theme(self.window.s.themes.current)
            self._controller.session.run_started.connect(self._on_run_started)
            timeline = self._controller.dashboard.timeline      # its bands and the canvas select each other
            timeline.node_clicked.connect(self._select_node)
            self.window.controller.selection_changed.connect(timeline.highlight)
            self._controller.run_ended.connect(
                lambda status, message: self.window.log.append(f"Run {status}: {message}".rstrip(": "),
                                                               "info" if status in ("completed", "early_stopped", "stopped") else "warning"))
            self.window.destroyed.connect(self._controller.shutdown)
        return self._controller

    def _on_theme(self, theme: Theme) -> None:
        apply_plot_theme(self.window, theme.name)  # the dashboard's and the runs dock's plots

    def _on_run_started(self, run_id: int) -> None:
        self.current_run = run_id

    def train(self) -> None:
        self.controller().open_train_dialog(self.window)

    def record_memory(self) -> None:
        """Run > Record Memory Timeline: the running job records its next steps; the Train workspace shows them."""
        ctl = self.controller()
        if not ctl.session.record_memory():
            self.window.statusBar().showMessage("No run is training: Train (Ctrl+T) starts one.", 6000)
            return
        ctl.show_dashboard()
        self.window.statusBar().showMessage("Recording the memory of the next two training steps...", 6000)

    def _select_node(self, node_id: str) -> None:
        """A timeline band was clicked: select its node on the canvas (shown in Design and Inspect)."""
        if node_id not in self.window.controller.graph.nodes:
            self.window.statusBar().showMessage(f"{node_id} is not in the graph being edited", 6000)
            return
        self.window.reveal(node_id)
        self.window.statusBar().showMessage(f"{node_id} selected on the canvas", 6000)

    def show_runs(self) -> None:
        self.window.workspaces.show("Runs")

    def close_guard(self) -> bool:
        """The window may close: no training built, or no run going, or the user chose."""
        ctl = self._controller
        return ctl is None or ctl.close_request(self.window, ask=lambda: self.window.s.prompts.running_run(self.window))

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
                self.window.workspaces.show(workspace)
        timer.timeout.connect(when_loaded)
        timer.start()
        return thread
