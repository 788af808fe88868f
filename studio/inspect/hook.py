"""The Inspect workspace's hook: registers the workspace with the window's workspaces.

The views live in :mod:`.workspace` behind :class:`~.workspace.InspectPort`; this module only
builds that port from the window's :class:`~studio.port.StudioPort`: the canvas, the selection, the
Problems list, and the training side (built lazily, ``training()`` gives it once built) for inspect
events and the Inspect Now command.
Nothing heavy is imported here: torch, pyqtgraph and the views load on the first switch to the
workspace, so the window opens as fast as without it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QDockWidget

if TYPE_CHECKING:
    from ..port import StudioPort
    from .workspace import InspectWorkspace

class InspectHook(QObject):
    """The Inspect workspace of one window: registered at once, its views built on first entry."""

    def __init__(self, port: StudioPort, training: Callable[[], Any] | None = None,
                 current_run: Callable[[], int | None] | None = None) -> None:
        super().__init__(port.owner)
        self.port = port
        self._training = training or (lambda: None)         # the training controller once built, else None
        self._current_run = current_run or (lambda: None)   # the run this window started last
        self.workspace: InspectWorkspace | None = None
        self.docks: list[QDockWidget] = []
        self.bridge: Any = None
        self.run_id: int | None = None
        port.workspaces.add("Inspect", docks=self.build, canvas=True,
                            tip="The backward pass of the design: autograd graph, saved bytes, live gradients")
        port.workspaces.changed.connect(self._entered)
        port.graph_replaced.connect(self._on_graph_replaced)
        port.add_close_guard(self._finish)

    def _on_graph_replaced(self, _name: str) -> None:
        """Another graph: nothing shown of the last one stays (its run's inspections neither)."""
        if self.workspace is not None:
            self.workspace.forget()

    def _finish(self) -> bool:
        """Closing: a capture still running on its thread ends first (a second or two at most)."""
        task = self.workspace.task if self.workspace is not None else None
        if task is not None and task.is_running():
            task.wait()
        return True

    def build(self) -> list[QDockWidget]:
        """The views and their two docks (called by the workspaces on the first switch to Inspect)."""
        from .workspace import InspectPort, InspectWorkspace

        studio = self.port
        port = InspectPort(
            canvas=studio.canvas,
            graph=lambda: studio.graph,
            select=lambda node_id: studio.select([node_id]),
            selection_changed=studio.selection_changed,
            set_problems=lambda problems: studio.set_problems(problems, source="inspect"),
            request_inspect=self.request,
        )
        self.workspace = InspectWorkspace(port, self)
        for title, name, panel in (("Backward graph", "inspectBackwardDock", self.workspace.backward_panel),
                                   ("Gradient flow", "inspectFlowDock", self.workspace.flow_panel)):
            dock = QDockWidget(title, studio.owner)
            dock.setObjectName(name)
            dock.setWidget(panel)
            self.docks.append(dock)
        # Side by side under the design: the backward graph reads left to right like the design, so it
        # gets the wide half; the gradient-flow plot the rest.
        studio.add_docks(self.docks, widths=(0.58, 0.42), height=0.47)
        studio.theme_changed.connect(self._on_theme)
        self._on_theme(studio.theme)
        return self.docks

    def _on_theme(self, theme: Any) -> None:
        from ..training.plot_theme import apply_plot_theme

        assert self.workspace is not None
        self.workspace.view.set_theme(theme.name)
        for panel in (self.workspace.backward_panel, self.workspace.flow_panel):
            apply_plot_theme(panel, theme.name)

    def _entered(self, name: str) -> None:
        if name == "Inspect":
            self.follow_training()

    # ---------------------------------------------------------------- the training side
    def training(self) -> Any:
        """The training controller, once the window has built it (None before)."""
        return self._training()

    def follow_training(self) -> None:
        """Follow the worker's events (once the training side is built); show the stored inspections of
        the run chosen in the Runs workspace (one selected), else of the run this window started."""
        ctl = self.training()
        if ctl is None or self.workspace is None:
            return
        if self.bridge is not ctl.session.bridge:
            self.bridge = ctl.session.bridge
            self.bridge.event.connect(self._on_event)
        chosen = ctl.runs.selected_ids()
        run_id = chosen[0] if len(chosen) == 1 else self._current_run()
        if run_id is not None and run_id != self.run_id:
            self.load_run(ctl.store, run_id)

    def load_run(self, store: Any, run_id: int) -> None:
        """Show the inspections stored with run ``run_id`` (a finished run is inspected later this way)."""
        from trainer.inspection import reports_from_metrics

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
        self.follow_training()
        ctl = self.training()
        if ctl is None or not ctl.session.is_running():
            return False
        from trainer.protocol.events import InspectNow

        return bool(ctl.session.bridge.send(InspectNow()))

    def _on_event(self, event: Any) -> None:
        if self.workspace is None:
            return
        if event.event == "run_started":
            self.run_id = event.run_id
            self.workspace.reset_run()
        elif event.event == "inspect":
            from trainer.inspection import read_report

            try:
                self.workspace.add_report(read_report(event.path))
            except ValueError as exc:
                self.port.log(f"Inspection not shown: {exc}", "warning")
