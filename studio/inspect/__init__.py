"""The Inspect workspace: the backward graph of the design, a heat overlay on the canvas, live
gradient figures from a run. ``install(window)`` registers it with the window's workspaces.

The views live in :mod:`.workspace` behind :class:`~.workspace.InspectPort`; this module only
builds the port from the main window: the canvas, the controller's selection, the Problems list,
and the training side (built lazily by the window) for inspect events and the Inspect Now command.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Qt
from PySide6.QtWidgets import QDockWidget

from .workspace import InspectPort, InspectWorkspace

if TYPE_CHECKING:
    from studio.main_window import MainWindow

__all__ = ["InspectLink", "InspectPort", "InspectWorkspace", "install"]


class InspectLink(QObject):
    """Connects the workspace to the window's training side once that exists: inspect events of the
    running worker, Inspect Now, and the stored inspections of the current run."""

    def __init__(self, window: MainWindow, workspace: InspectWorkspace) -> None:
        super().__init__(workspace)
        self.window, self.workspace = window, workspace
        self.bridge: Any = None
        self.run_id: int | None = None

    def training(self) -> Any:
        hook = getattr(self.window, "training", None)
        return hook.controller() if hook is not None and hook.built else None

    def connect(self) -> None:
        """Follow the worker's events (once the training side is built); load the current run's stored
        inspections when the run changed."""
        ctl = self.training()
        if ctl is None:
            return
        if self.bridge is not ctl.session.bridge:
            self.bridge = ctl.session.bridge
            self.bridge.event.connect(self._on_event)
        run_id = getattr(self.window.training, "current_run", None)
        if run_id is not None and run_id != self.run_id:
            self.load_run(ctl.store, run_id)

    def load_run(self, store: Any, run_id: int) -> None:
        from trainer.inspect import reports_from_metrics

        self.run_id = run_id
        self.workspace.reset_run()
        for report in reports_from_metrics(store.metrics(run_id)):
            self.workspace.add_report(report)

    def request(self) -> bool:
        self.connect()
        ctl = self.training()
        if ctl is None or not ctl.session.is_running():
            return False
        from trainer.events import COMMAND_TYPES

        command = COMMAND_TYPES.get("inspect")
        return bool(command is not None and ctl.session.bridge.send(command()))

    def _on_event(self, event: Any) -> None:
        name = event.event
        if name == "run_started":
            self.run_id = event.run_id
            self.workspace.reset_run()
        elif name == "inspect":
            from trainer.inspect import read_report

            try:
                self.workspace.add_report(read_report(event["path"]))
            except (KeyError, ValueError) as exc:
                self.window.log.append(f"Inspection not shown: {exc}", "warning")


def install(window: MainWindow) -> InspectWorkspace:
    """Register the Inspect workspace (canvas + Backward graph + Gradient flow docks) with ``window``."""
    link: InspectLink | None = None
    port = InspectPort(
        canvas=window.canvas,
        graph=lambda: window.controller.graph,
        select=lambda node_id: window.controller.select([node_id]),
        selection_changed=window.controller.selection_changed,
        set_problems=lambda problems: window.problems.set_problems(problems, source="inspect"),
        request_inspect=lambda: link is not None and link.request(),
    )
    workspace = InspectWorkspace(port, window)
    link = InspectLink(window, workspace)
    workspace.link = link
    docks = []
    for title, name, panel, area in (
            ("Backward graph", "inspectBackwardDock", workspace.backward_panel, Qt.DockWidgetArea.RightDockWidgetArea),
            ("Gradient flow", "inspectFlowDock", workspace.flow_panel, Qt.DockWidgetArea.BottomDockWidgetArea)):
        dock = QDockWidget(title, window, objectName=name)
        dock.setWidget(panel)
        window.addDockWidget(area, dock)
        dock.hide()
        docks.append(dock)
    workspace.docks = docks
    window.workspaces.add("Inspect", docks=docks, canvas=True,
                          tip="The backward pass of the design: autograd graph, saved bytes, live gradients")
    sized = []

    def entered(name: str) -> None:
        if name != "Inspect":
            return
        if not sized:  # first entry: room for the plots and the blocks
            sized.append(True)
            window.resizeDocks([docks[0]], [400], Qt.Orientation.Horizontal)
            window.resizeDocks([docks[1]], [340], Qt.Orientation.Vertical)
        link.connect()

    window.workspaces.changed.connect(entered)
    return workspace
