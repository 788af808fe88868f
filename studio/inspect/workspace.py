"""The Inspect workspace's views and their wiring, behind a narrow port (:class:`InspectPort`).

Two docks beside the design canvas: *Backward graph* (capture controls and the grouped backward
graph) and *Gradient flow* (the heat metric, Inspect Now, the flow plot and the selected node's
sparkline). Before training the capture gives structure and saved bytes; during or after a run the
inspect events (or a finished run's stored reports) give the live figures. Nodes whose gradients
vanish or explode are handed to the Problems list with the step they began at.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QObject, Signal, SignalInstance
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from graph_editor.autograd.capture import LOSS, AutogradCapture
from graph_editor.model import Graph, Problem
from graph_editor.ui.canvas import GraphCanvas
from trainer.inspection import InspectHistory, InspectReport

from ..training.tasks import BackgroundTask
from ..widgets import named
from .backward import BackwardView
from .flow import GradientFlowPlot, Sparkline
from .heat import METRIC_BY_KEY, METRICS, HeatOverlay, Metric


@dataclass
class InspectPort:
    """What the workspace needs from the window, and nothing more."""

    canvas: GraphCanvas
    graph: Callable[[], Graph]                     # the graph being edited
    select: Callable[[str], None]                  # select a node on the design canvas
    selection_changed: SignalInstance              # carries the selected ids (list[str])
    set_problems: Callable[[list[Problem]], None]  # the inspection's entries in the Problems list
    request_inspect: Callable[[], bool]            # ask the running worker for an inspection; False: none runs


def capture_for(graph: Graph, batch: int, precision: str) -> AutogradCapture | Problem:
    """The capture the workspace shows (a plain function, run on a background thread), or the
    Problem of the node that keeps it from being captured (one that reads the data's values)."""
    from graph_editor.autograd.capture import CaptureError, capture_autograd

    try:
        return capture_autograd(graph, batch, precision)
    except CaptureError as exc:
        if exc.node is None or exc.node not in graph.nodes:
            raise
        return Problem(exc.node, str(exc), severity="warning")  # the graph trains: only the capture cannot run


class InspectWorkspace(QObject):
    """The views of the Inspect workspace and what keeps them in step."""

    captured = Signal(object)   # AutogradCapture, shown
    reported = Signal(object)   # InspectReport, shown

    def __init__(self, port: InspectPort, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.port = port
        self.capture: AutogradCapture | None = None
        self.captured_graph: Graph | None = None  # the design as it was captured
        self.history = InspectHistory()
        self.task: BackgroundTask | None = None
        self._generation = 0   # a capture started before another graph was opened is not shown
        self.overlay = HeatOverlay(port.canvas)
        self._build_backward_panel()
        self._build_flow_panel()
        port.selection_changed.connect(self._on_canvas_selection)

    # ---------------------------------------------------------------- building
    def _build_backward_panel(self) -> None:
        self.backward_panel = named(QWidget(), "inspectBackwardPanel")
        self.batch = named(QSpinBox(), "inspectBatch")
        self.batch.setRange(1, 65536)
        self.batch.setValue(32)
        self.batch.setToolTip("The batch size of the captured training step")
        self.precision = named(QComboBox(), "inspectPrecision")
        self.precision.addItems(["fp32", "bf16"])
        self.capture_button = named(QPushButton("Capture"), "inspectCapture")
        self.capture_button.setToolTip("Run one training step of the graph as fake tensors (no memory) and show "
                                       "its backward graph")
        self.capture_button.clicked.connect(self.start_capture)
        self.capture_status = QLabel("Capture the backward graph of one training step.", wordWrap=True)
        self.view = BackwardView()
        self.view.node_selected.connect(self._on_block_selected)
        row = QHBoxLayout()
        row.addWidget(QLabel("Batch"))
        row.addWidget(self.batch)
        row.addWidget(self.precision)
        row.addWidget(self.capture_button)
        row.addStretch(1)
        layout = QVBoxLayout(self.backward_panel)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addLayout(row)
        layout.addWidget(self.capture_status)
        layout.addWidget(self.view, 1)

    def _build_flow_panel(self) -> None:
        self.flow_panel = named(QWidget(), "inspectFlowPanel")
        self.metric = named(QComboBox(), "inspectMetric")
        self.metric.addItem("No overlay", "")
        for m in METRICS:
            self.metric.addItem(m.label, m.key)
        self.metric.setToolTip("Colour the design canvas's nodes by this figure")
        self.metric.currentIndexChanged.connect(self._on_metric)
        self.inspect_button = named(QPushButton("Inspect Now"), "inspectNow")
        self.inspect_button.setToolTip("Ask the running training for an inspection on its next batch")
        self.inspect_button.clicked.connect(self.inspect_now)
        self.flow_status = QLabel("Live figures appear when a run sends an inspection.", wordWrap=True)
        self.flow = GradientFlowPlot()
        self.spark = Sparkline()
        row = QHBoxLayout()
        row.addWidget(QLabel("Heat overlay"))
        row.addWidget(self.metric, 1)
        row.addWidget(self.inspect_button)
        layout = QVBoxLayout(self.flow_panel)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addLayout(row)
        layout.addWidget(self.flow_status)
        layout.addWidget(self.flow, 3)
        layout.addWidget(self.spark, 1)

    # ---------------------------------------------------------------- capture
    def start_capture(self) -> None:
        """Capture the edited graph at the chosen batch and precision, off the GUI thread."""
        if self.task is not None and self.task.is_running():
            return
        graph = self.port.graph().copy()
        batch, precision = self.batch.value(), self.precision.currentText()
        self.capture_status.setText(f"Capturing one step at batch {batch}, {precision}…")
        self.capture_button.setEnabled(False)
        self.task = BackgroundTask(lambda: capture_for(graph, batch, precision), self)
        generation = self._generation
        self.task.done.connect(lambda result: None if generation != self._generation else (
            self._capture_failed(result.message, result) if isinstance(result, Problem)
            else self.show_capture(result, graph)))
        self.task.error.connect(lambda message: self._capture_failed(message) if generation == self._generation
                                else None)
        self.task.start()

    def _capture_failed(self, message: str, problem: Problem | None = None) -> None:
        self.capture_button.setEnabled(True)
        self.capture_status.setText(f"Cannot capture: {message}")
        if problem is not None:  # on its node in Problems, where the user can go to it
            self.port.set_problems([problem])

    def show_capture(self, capture: AutogradCapture, graph: Graph | None = None) -> None:
        """Show ``capture`` of ``graph`` (default: the graph being edited)."""
        self.capture_button.setEnabled(True)
        self.capture, self.captured_graph = capture, graph or self.port.graph()
        self.view.set_capture(capture, self.captured_graph)
        from graph_editor.model.units import nbytes

        note = f" ({capture.note})" if capture.note else ""
        self.capture_status.setText(
            f"{len(capture.nodes)} autograd nodes over {len(capture.owners)} graph nodes; "
            f"{nbytes(capture.saved_bytes)} saved for backward at batch {capture.batch}, "
            f"{capture.precision}{note}")
        if self.metric.currentData() == "":
            self.metric.setCurrentIndex(self.metric.findData("saved_bytes"))
        self.refresh_overlay()
        self._refresh_block_sparklines()
        self.captured.emit(capture)

    # ---------------------------------------------------------------- live figures
    def inspect_now(self) -> None:
        if self.port.request_inspect():
            self.flow_status.setText("Inspection requested: it runs on the next batch.")
        else:
            self.flow_status.setText("No run is training: start one (Run > Train…) to inspect it live.")

    def add_report(self, report: InspectReport) -> None:
        """A new inspection of the run (from an inspect event or the run store)."""
        self.history.add(report)
        latest = self.history.latest
        assert latest is not None
        self.flow.show_report(latest)
        flags = self.history.flags()
        loss = "" if latest.loss is None else f"loss {latest.loss:.4g}; "
        self.flow_status.setText(f"Step {latest.step}: {loss}{len(latest.nodes)} nodes; "
                                 + (f"{len(flags)} gradient problem(s)" if flags else "gradients in range"))
        self.port.set_problems([
            Problem(f.node, f"gradient {f.kind} since step {f.first_step}: {_figure_name(f.figure)} = {f.value:.3g} "
                            f"at step {f.step}", severity="warning")
            for f in flags])
        if self.metric.currentData() in ("", "saved_bytes"):
            self.metric.setCurrentIndex(self.metric.findData("grad_w"))
        self.refresh_overlay()
        self._refresh_spark()
        self._refresh_block_sparklines()
        self.reported.emit(report)

    def forget(self) -> None:
        """Another graph was opened: the capture, the overlay with its legend, the gradient plots and the
        inspection problems were of the last one, and go (a capture still running is not shown)."""
        self._generation += 1
        self.capture_button.setEnabled(True)
        self.capture, self.captured_graph = None, None
        self.view.clear()
        self.history = InspectHistory()
        self.flow.clear_report()
        self.metric.setCurrentIndex(0)      # no overlay: it clears itself and its legend
        self.overlay.clear()
        self.capture_status.setText("Capture the backward graph of one training step.")
        self.flow_status.setText("Live figures appear when a run sends an inspection.")
        self._refresh_spark(None)
        self.port.set_problems([])

    def reset_run(self) -> None:
        """A new run starts: its history starts empty."""
        self.history = InspectHistory()
        self.port.set_problems([])

    # ---------------------------------------------------------------- overlay and selection
    def values(self, metric: Metric) -> dict[str, float]:
        """Per graph node values of ``metric`` from the capture or the latest report."""
        if metric.key == "saved_bytes":
            if self.capture is None:
                return {}
            return {s.owner: float(s.saved_bytes) for s in self.capture.summaries() if s.owner != LOSS}
        latest = self.history.latest
        if latest is None:
            return {}
        return {n.node: v for n in latest.nodes if (v := getattr(n, metric.key)) is not None}

    def _on_metric(self, _index: int) -> None:
        self.refresh_overlay()
        self._refresh_spark()
        self._refresh_block_sparklines()

    def refresh_overlay(self) -> None:
        key = self.metric.currentData()
        if not key:
            self.overlay.clear()
            self.view.show_heat(None, {})
            return
        metric = METRIC_BY_KEY[key]
        values = self.values(metric)
        self.overlay.show(metric, values)
        self.view.show_heat(metric, values)

    def _on_block_selected(self, node_id: str) -> None:
        if node_id != LOSS:
            self.port.select(node_id)
        self._refresh_spark(node_id)

    def _on_canvas_selection(self, ids: list[str]) -> None:
        node = ids[0] if ids else None
        self.view.select(node)
        self._refresh_spark(node)

    def _refresh_block_sparklines(self) -> None:
        key = self.metric.currentData() or "grad_w"
        key = "grad_w" if key == "saved_bytes" else key
        self.view.backward.set_history({owner: self.history.series(owner, key)[1]
                                        for owner in self.view.controller.graph.groups}, _figure_name(key, short=True),
                                       METRIC_BY_KEY[key].format)

    def _refresh_spark(self, node: str | None = None) -> None:
        node = node or self._selected()
        key = self.metric.currentData() or "grad_w"
        if key == "saved_bytes":
            key = "grad_w"
        if node is None:
            self.spark.show_series("select a node for its history", [], [], False)
            return
        steps, values = self.history.series(node, key)
        self.spark.show_series(f"{node}: {_figure_name(key)} over the run", steps, values, METRIC_BY_KEY[key].log)

    def _selected(self) -> str | None:
        return self.view.selected_node()


SHORT_NAMES = {"grad_out": "||dL/dy||", "grad_w": "||dL/dW||", "update_ratio": "update", "zero_fraction": "dead",
               "backward_s": "time"}


def _figure_name(key: str, short: bool = False) -> str:
    if key in ("grad_out", "grad_w") or (short and key in SHORT_NAMES):
        return SHORT_NAMES[key]
    return METRIC_BY_KEY[key].label if key in METRIC_BY_KEY else key

