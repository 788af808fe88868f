"""The export dialog: runs one export off the GUI thread, shows progress, then the proof.

``ExportDialog(make_source, "onnx", output)`` builds the source and exports in a worker thread
(the GUI never blocks), then shows the verdict, every check, the figures (max difference, top-1
agreement, exported vs PyTorch eager latency, file size) and "Show in Folder". An export that
names a node (a layer the format cannot express) offers "Show Node" (``node_chosen``).
Preview: ``python -m studio.export.dialog [GRAPH] [FORMAT]``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QEvent, Qt, QThread, QUrl, Signal
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHeaderView,
    QLabel,
    QProgressBar,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from graph_editor.ui.background import pause_collection, resume_collection

from ..themes import verdict_colour
from ..widgets import named
from .job import ExportJob


class ExportDialog(QDialog):
    """Progress, then the report of one export."""

    exported = Signal(bool)      # the export ended: True when it passed (or was written unverified)
    node_chosen = Signal(str)

    def __init__(self, make_source: Callable[[], Any], fmt: str, output: str | Path, options: Any = None,
                 parent: QWidget | None = None, untrained: bool = False) -> None:
        super().__init__(parent)
        self.setObjectName("exportDialog")
        self.untrained = untrained  # the graph's initial weights, no run: the verdict says so
        from exporters.registry import describe_formats

        title = next((i.title for i in describe_formats() if i.name == fmt), fmt)
        self.setWindowTitle(f"Export {title}")
        self.report: Any = None
        self.verdict_ok: bool | None = None   # the verdict shown (coloured in the theme), None while exporting
        self._node = ""
        self.verdict = named(QLabel("Exporting…"), "exportVerdict")
        self.verdict.setStyleSheet("font-size: 15px; font-weight: 600;")
        self.status = named(QLabel(""), "exportStatus")
        self.status.setWordWrap(True)
        self.busy = named(QProgressBar(), "exportProgress")
        self.busy.setRange(0, 0)
        self.checks = named(QTableWidget(0, 2), "exportChecks")
        self.checks.setHorizontalHeaderLabels(["Check", "Result"])
        self.checks.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        self.checks.horizontalHeader().setStretchLastSection(True)
        self.checks.verticalHeader().hide()
        self.checks.setWordWrap(True)
        self.checks.hide()
        self.figures = QFormLayout()
        self.path = named(QLabel(""), "exportPath")
        self.path.setWordWrap(True)
        self.path.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.buttons.rejected.connect(self.reject)
        self.folder_button = named(QPushButton("Show in Folder"), "exportShowFolder")
        self.folder_button.setEnabled(False)
        self.folder_button.clicked.connect(self.show_in_folder)
        self.node_button = named(QPushButton("Show Node"), "exportShowNode")
        self.node_button.clicked.connect(lambda: self.node_chosen.emit(self._node))
        self.buttons.addButton(self.folder_button, QDialogButtonBox.ButtonRole.ActionRole)
        self.buttons.addButton(self.node_button, QDialogButtonBox.ButtonRole.ActionRole)
        self.node_button.hide()  # shown only when an export fails at a node
        layout = QVBoxLayout(self)
        for w in (self.verdict, self.busy, self.status, self.checks):
            layout.addWidget(w)
        layout.addLayout(self.figures)
        layout.addWidget(self.path)
        layout.addStretch(1)
        layout.addWidget(self.buttons)
        self.resize(620, 460)
        self._thread = QThread(self)
        self._job = ExportJob(make_source, fmt, output, options)
        self._job.moveToThread(self._thread)
        self._thread.started.connect(self._job.run)
        self._job.progress.connect(self.status.setText)
        self._job.finished.connect(self._on_finished)
        self._job.failed.connect(self._on_failed)
        # quit straight from the worker thread: a queued quit would wait for a GUI thread blocked in wait()
        self._job.finished.connect(self._thread.quit, Qt.ConnectionType.DirectConnection)
        self._job.failed.connect(self._thread.quit, Qt.ConnectionType.DirectConnection)
        self.finished_export = False
        # Python's automatic garbage collection waits while the export runs (its thread allocates without
        # end; the collector run there would destroy the GUI's garbage Qt objects off the GUI thread)
        token = self._exporting = object()
        self._thread.finished.connect(self._thread_ended)            # queued: the dialog lives on the GUI thread
        self.destroyed.connect(lambda *_: resume_collection(token))

    def start(self) -> None:
        """Start the export in its worker thread (the dialog stays responsive)."""
        pause_collection(self._exporting)
        self._thread.start()

    def wait(self, ms: int = 600_000) -> bool:
        """Block until the worker thread ends (for closing the window mid-export)."""
        ended = self._thread.wait(ms)
        if ended:
            self._thread_ended()
        return ended

    def _thread_ended(self) -> None:
        resume_collection(self._exporting)

    def run_to_end(self, timeout_s: float = 600.0) -> bool:
        """Start if needed and process events until the report (or the error) is shown (previews)."""
        import time

        from PySide6.QtWidgets import QApplication

        if not self._thread.isRunning() and not self.finished_export:
            self.start()
        end = time.monotonic() + timeout_s
        while not self.finished_export and time.monotonic() < end:
            QApplication.processEvents()
            self._thread.wait(20)
        QApplication.processEvents()
        return self.finished_export

    def _on_finished(self, report: Any) -> None:
        self.report = report
        self.busy.hide()
        ok = report.ok
        if not report.verified:
            verdict = "Exported, NOT verified"
        else:
            verdict = "Export verified: outputs match PyTorch" if ok else "Export FAILED its checks"
        if self.untrained:
            verdict += " · untrained weights (no run: train first to ship a model that has learned)"
        self.verdict.setText(verdict)
        self.verdict.setWordWrap(True)
        self._colour_verdict(ok)
        self.status.setText(report.source)
        self._fill_checks(report.checks)
        self._fill_figures(report.metrics)
        notes = "".join(f"<br>{n}" for n in report.notes if "unverified" in n or "renamed" in n)
        self.path.setText(f"<b>File:</b> {report.path}<br><b>Report:</b> "
                          f"{report.report_files[1] if report.report_files else ''}{notes}")
        self.folder_button.setEnabled(True)
        self.finished_export = True
        self.exported.emit(ok)

    def _on_failed(self, message: str, node: str) -> None:
        self.busy.hide()
        self.verdict.setText("Export failed")
        self._colour_verdict(False)
        self.status.setText(message)
        self._node = node
        self.node_button.setVisible(bool(node))
        self.finished_export = True
        self.exported.emit(False)

    def _fill_checks(self, checks: list[Any]) -> None:
        self.checks.setRowCount(len(checks))
        for row, check in enumerate(checks):
            mark = QTableWidgetItem(("✔ " if check.passed else "✘ ") + check.name)
            if not check.passed:   # a passed check keeps the theme's text colour, whatever theme comes next
                mark.setForeground(self._red())
            self.checks.setItem(row, 0, mark)
            self.checks.setItem(row, 1, QTableWidgetItem(check.detail))
        self.checks.resizeRowsToContents()
        rows = sum(self.checks.rowHeight(r) for r in range(len(checks)))
        self.checks.setFixedHeight(rows + self.checks.horizontalHeader().height() + 2 * self.checks.frameWidth())
        self.checks.setVisible(bool(checks))

    def _fill_figures(self, metrics: dict[str, Any]) -> None:
        from exporters import get_format
        from exporters.report import _fmt

        form = get_format(self._job.fmt)  # the format names its figures and its latency metric
        for key, label in form.report_figures():
            if metrics.get(key) is not None:
                self.figures.addRow(label + ":", named(QLabel(_fmt(key, metrics[key])), f"figure_{key}"))
        eager = metrics.get("pytorch_eager_ms")
        for key in (form.latency,) if form.latency else ():
            if metrics.get(key) is not None and eager:
                name = key.removesuffix("_ms")
                text = f"{metrics[key]:.2f} ms ({name}) vs {eager:.2f} ms (PyTorch eager), x{eager / metrics[key]:.2f}"
                self.figures.addRow("Latency:", named(QLabel(text), "figure_latency"))

    def _colour_verdict(self, ok: bool) -> None:
        self.verdict_ok = ok
        colour = verdict_colour(self.palette(), ok).name()
        self.verdict.setStyleSheet(f"font-size: 15px; font-weight: 600; color: {colour};")

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 - Qt's name
        """The theme changed under an open dialog: its verdict and failed checks take the new one's colours
        (the dark theme's green stood at 1.4:1 on the light window)."""
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange and self.verdict_ok is not None:
            self._colour_verdict(self.verdict_ok)
            if self.report is not None:
                self._fill_checks(self.report.checks)

    def _red(self) -> Any:
        from PySide6.QtGui import QBrush

        return QBrush(verdict_colour(self.palette(), False))

    def show_in_folder(self) -> bool:
        """Open the export's folder in the file manager; where none can be started, say where it is."""
        if self.report is None:
            return False
        folder = Path(self.report.path).parent
        if QDesktopServices.openUrl(QUrl.fromLocalFile(str(folder))):
            return True
        self.status.setText(f"No file manager could be opened. The files are in {folder}")
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        return False


def _preview() -> int:
    import tempfile

    from exporters import from_graph
    from graph_editor.model import load_graph

    from ..preview import preview

    graph_path = sys.argv[1] if len(sys.argv) > 1 else str(Path(__file__).resolve().parents[2] / "assets" /
                                                            "templates" / "lenet5.graph.json")
    fmt = sys.argv[2] if len(sys.argv) > 2 else "onnx"
    out = Path(tempfile.mkdtemp(prefix="torch-studio-export-"))

    def make() -> ExportDialog:
        dialog = ExportDialog(lambda: from_graph(load_graph(graph_path)), fmt, out)
        dialog.run_to_end()
        return dialog

    return preview(make, "Export", (620, 460))


if __name__ == "__main__":
    sys.exit(_preview())
