"""The Inspect workspace: the backward graph of the design, a heat overlay on the canvas, live
gradient figures from a run. ``install(window)`` registers it with the window's workspaces.

The views live in :mod:`.workspace` behind :class:`~.workspace.InspectPort`; this module only
builds the port from the main window: the canvas, the controller's selection, the Problems list,
and the training side (built lazily by the window) for inspect events and the Inspect Now command.
Nothing heavy is imported here: torch, pyqtgraph and the views load on the first switch to the
workspace, so the window opens as fast as without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Qt
from PySide6.QtWidgets import QDockWidget

if TYPE_CHECKING:
    from studio.main_window import MainWindow

    from .workspace import InspectWorkspace

__all__ = ["InspectHook", "install"]


class InspectHook(QObject):
    """The Inspect workspace of one window: registered at once, its views built on first entry."""

    def __init__(self, window: MainWindow) -> None:
        super().__init__(window)
        self.window = window
        self.workspace: InspectWorkspace | None = None
        self.docks: list[QDockWidget] = []
        self.bridge: Any = None
        self.run_id: int | None = None
        window.workspaces.add("Inspect", docks=self.build, canvas=True,
                              tip="The backward pass of the design: autograd graph, saved bytes, live gradients")
        window.workspaces.changed.connect(self._entered)
        window.add_close_guard(self._finish)

    def _finish(self) -> bool:
        """Closing: a capture still running on its thread ends first (a second or two at most)."""
        task = self.workspace.task if self.workspace is not None else None
        if task is not None and task.is_running():
            task.wait()
        return True

    def build(self) -> list[QDockWidget]:
        """The views and their two docks (called by the workspaces on the first switch to Inspect)."""
        from .workspace import InspectPort, InspectWorkspace

        w = self.window
        port = InspectPort(
            canvas=w.canvas,
            graph=lambda: w.controller.graph,
            select=lambda node_id: w.controller.select([node_id]),
            selection_changed=w.controller.selection_changed,
            set_problems=lambda problems: w.problems.set_problems(problems, source="inspect"),
            request_inspect=self.request,
        )
        self.workspace = InspectWorkspace(port, self)
        for title, name, panel in (("Backward graph", "inspectBackwardDock", self.workspace.backward_panel),
                                   ("Gradient flow", "inspectFlowDock", self.workspace.flow_panel)):
            dock = QDockWidget(title, w, objectName=name)
            dock.setWidget(panel)
            w.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, dock)
            self.docks.append(dock)
        # Side by side under the design: the backward graph reads left to right like the design, so it
        # gets the wide half; the gradient-flow plot the rest.
        w.splitDockWidget(self.docks[0], self.docks[1], Qt.Orientation.Horizontal)
        w.resizeDocks(self.docks, [int(w.width() * 0.58), int(w.width() * 0.42)], Qt.Orientation.Horizontal)
        w.resizeDocks([self.docks[0]], [int(w.height() * 0.47)], Qt.Orientation.Vertical)
        w.s.themes.changed.connect(self._on_theme)
        self._on_theme(w.s.themes.current)
        return self.docks

    def _on_theme(self, theme: Any) -> None:
        from ..training.plot_theme import apply_plot_theme

        assert self.workspace is not None
        self.workspace.view.set_theme(theme.name)
        for panel in (self.workspace.backward_panel, self.workspace.flow_panel):
            apply_plot_theme(panel, theme.name)

    def _entered(self, name: str) -> None:
        if name == "Inspect":
            self.connect()

    # ---------------------------------------------------------------- the training side
    def training(self) -> Any:
        hook = getattr(self.window, "training", None)
        return hook.controller() if hook is not None and hook.built else None

    def connect(self) -> None:
        """Follow the worker's events (once the training side is built); show the stored inspections of
        the run chosen in the Runs workspace (one selected), else of the run this window started."""
        ctl = self.training()
        if ctl is None or self.workspace is None:
            return
        if self.bridge is not ctl.session.bridge:
            self.bridge = ctl.session.bridge
            self.bridge.event.connect(self._on_event)
        chosen = ctl.runs.selected_ids()
        run_id = chosen[0] if len(chosen) == 1 else getattr(self.window.training, "current_run", None)
        if run_id is not None and run_id != self.run_id:
            self.load_run(ctl.store, run_id)

    def load_run(self, store: Any, run_id: int) -> None:
        """Show the inspections stored with run ``run_id`` (a finished run is inspected later this way)."""
        from trainer.inspect import reports_from_metrics

        assert self.workspace is not None
        self.run_id = run_id
        self.workspace.reset_run()
        reports = reports_from_metrics(store.metrics(run_id))
        for report in reports:
            self.workspace.add_report(report)
        if not reports:
            self.workspace.flow_status.setText(f"Run {run_id} has no inspections yet: Inspect Now asks a running "
                                               "run for one (or set train.inspect_every_s in its spec).")

    def request(self) -> bool:
        """Send the running worker the inspect command; False when no run is training."""
        self.connect()
        ctl = self.training()
        if ctl is None or not ctl.session.is_running():
            return False
        from trainer.events import InspectNow

        return bool(ctl.session.bridge.send(InspectNow()))

    def _on_event(self, event: Any) -> None:
        if self.workspace is None:
            return
        if event.event == "run_started":
            self.run_id = event.run_id
            self.workspace.reset_run()
        elif event.event == "inspect":
            from trainer.inspect import read_report

            try:
                self.workspace.add_report(read_report(event.path))
            except ValueError as exc:
                self.window.log.append(f"Inspection not shown: {exc}", "warning")


def install(window: MainWindow) -> InspectHook:
    """Register the Inspect workspace (canvas + Backward graph + Gradient flow docks) with ``window``."""
    return InspectHook(window)
