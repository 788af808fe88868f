"""The export dialog: runs one export off the GUI thread, shows progress, then the proof.

``ExportDialog(make_source, "onnx", output)`` builds the source and exports in a worker thread
(the GUI never blocks), then shows the verdict, every check, the figures (max difference, top-1
agreement, exported vs PyTorch eager latency, file size) and "Show in Folder". An export that
names a node (a layer the format cannot express) offers "Show Node" (``node_chosen``).
Preview: ``python -m studio.export_dialog [GRAPH] [FORMAT]``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Qt, QThread, QUrl, Signal, Slot
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

if TYPE_CHECKING:
    from .port import StudioPort

EXPORT_MENU = "E&xport"


class ExportJob(QObject):
    """Builds the source and exports it; lives in a worker thread."""

    progress = Signal(str)
    finished = Signal(object)   # the ExportReport
    failed = Signal(str, str)   # message, node id ("" when no node is at fault)

    def __init__(self, make_source: Callable[[], Any], fmt: str, output: str | Path, options: Any = None) -> None:
        super().__init__()
        self.make_source, self.fmt, self.output, self.options = make_source, fmt, output, options

    @Slot()
    def run(self) -> None:
        from exporters import ExportError, export

        try:
            self.progress.emit("preparing the model")
            source = self.make_source()
            report = export(source, self.fmt, self.output, self.options, progress=self.progress.emit)
        except ExportError as exc:
            self.failed.emit(str(exc), exc.node or "")
        except Exception as exc:  # shown in the dialog, never a traceback on the user's screen
            self.failed.emit(f"{type(exc).__name__}: {exc}", "")
        else:
            self.finished.emit(report)


class ExportDialog(QDialog):
    """Progress, then the report of one export."""

    done = Signal(bool)          # True when the export passed (or was written unverified)
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
        self._node = ""
        self.verdict = QLabel("Exporting…", objectName="exportVerdict")
        self.verdict.setStyleSheet("font-size: 15px; font-weight: 600;")
        self.status = QLabel("", wordWrap=True, objectName="exportStatus")
        self.busy = QProgressBar(objectName="exportProgress")
        self.busy.setRange(0, 0)
        self.checks = QTableWidget(0, 2, objectName="exportChecks")
        self.checks.setHorizontalHeaderLabels(["Check", "Result"])
        self.checks.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        self.checks.horizontalHeader().setStretchLastSection(True)
        self.checks.verticalHeader().hide()
        self.checks.setWordWrap(True)
        self.checks.hide()
        self.figures = QFormLayout()
        self.path = QLabel("", wordWrap=True, objectName="exportPath")
        self.path.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.buttons.rejected.connect(self.reject)
        self.folder_button = QPushButton("Show in Folder", objectName="exportShowFolder", enabled=False)
        self.folder_button.clicked.connect(self.show_in_folder)
        self.node_button = QPushButton("Show Node", objectName="exportShowNode")
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

    def start(self) -> None:
        """Start the export in its worker thread (the dialog stays responsive)."""
        self._thread.start()

    def wait(self, ms: int = 600_000) -> bool:
        """Block until the worker thread ends (for closing the window mid-export)."""
        return self._thread.wait(ms)

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
        self.verdict.setStyleSheet(f"font-size: 15px; font-weight: 600; color: {'#2e7d32' if ok else '#c62828'};")
        self.status.setText(report.source)
        self._fill_checks(report.checks)
        self._fill_figures(report.metrics)
        notes = "".join(f"<br>{n}" for n in report.notes if "unverified" in n or "renamed" in n)
        self.path.setText(f"<b>File:</b> {report.path}<br><b>Report:</b> "
                          f"{report.report_files[1] if report.report_files else ''}{notes}")
        self.folder_button.setEnabled(True)
        self.finished_export = True
        self.done.emit(ok)

    def _on_failed(self, message: str, node: str) -> None:
        self.busy.hide()
        self.verdict.setText("Export failed")
        self.verdict.setStyleSheet("font-size: 15px; font-weight: 600; color: #c62828;")
        self.status.setText(message)
        self._node = node
        self.node_button.setVisible(bool(node))
        self.finished_export = True
        self.done.emit(False)

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
                self.figures.addRow(label + ":", QLabel(_fmt(key, metrics[key]), objectName=f"figure_{key}"))
        eager = metrics.get("pytorch_eager_ms")
        for key in (form.latency,) if form.latency else ():
            if metrics.get(key) is not None and eager:
                name = key.removesuffix("_ms")
                text = f"{metrics[key]:.2f} ms ({name}) vs {eager:.2f} ms (PyTorch eager), x{eager / metrics[key]:.2f}"
                self.figures.addRow("Latency:", QLabel(text, objectName="figure_latency"))

    @staticmethod
    def _red() -> Any:
        from PySide6.QtGui import QBrush, QColor

        return QBrush(QColor("#c62828"))

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


def default_export_dir(graph_path: str | Path | None) -> Path:
    """Where exports of the graph at ``graph_path`` go (see :meth:`ExportHook._default_dir`)."""
    import os

    import platformdirs

    from .resources import ASSETS

    if graph_path is not None:
        folder = Path(graph_path).resolve().parent
        if not folder.is_relative_to(ASSETS.resolve()) and os.access(folder, os.W_OK):
            return folder / "exports"
    return Path(platformdirs.user_documents_dir()) / "Torch Studio exports"


class ExportHook(QObject):
    """The Export menu and the one-click "Export ONNX" toolbar button, added through the window's port.

    One click exports the best checkpoint of the newest completed run of the current run's graph
    (``current_run()`` gives the run this window started last; :func:`exporters.run_source.one_click_run`
    chooses), or, with no run, the graph being edited (a snapshot taken at the click), into ``export_dir()``, and opens the
    report dialog. Installed by the composition root: ``ExportHook(port, db_url=..., current_run=...)``.
    """

    def __init__(self, port: StudioPort, db_url: str | None = None,
                 current_run: Callable[[], int | None] | None = None,
                 export_dir: Callable[[], Path] | None = None) -> None:
        super().__init__(port.host)
        from exporters.registry import describe_formats  # read from the format files: no torch at start-up

        from .actions import ActionSpec

        self.port, self.db_url = port, db_url
        self.current_run = current_run or (lambda: None)
        self.export_dir = export_dir or self._default_dir
        self.dialogs: list[ExportDialog] = []
        self.actions: dict[str, Any] = {}
        formats = describe_formats()
        last = max((k for k, i in enumerate(formats) if i.toolbar), default=len(formats) - 1)
        for k, info in enumerate(formats):
            spec = ActionSpec(f"export_{info.name}", info.menu_text, EXPORT_MENU, info.shortcut or None,
                              "export" if info.toolbar else "", info.toolbar, info.tip,
                              separator=k == last + 1)   # the one-click format(s) apart from the rest
            self.actions[info.name] = port.add_action(spec, lambda f=info.name: self.export(f))
        self.menu = port.menu(EXPORT_MENU)
        self.menu.aboutToShow.connect(self._refresh)
        port.add_close_guard(self.close_guard)

    def _refresh(self) -> None:
        from exporters import get_format

        has_run = self.current_run() is not None
        for fmt, action in self.actions.items():
            form = get_format(fmt)
            missing = form.missing()
            action.setEnabled(missing is None and (has_run or not form.needs_run))
            action.setToolTip(missing or ("needs a run: train first" if form.needs_run and not has_run
                                          else action.statusTip()))

    def _default_dir(self) -> Path:
        """Beside the graph file (``exports/``), unless it is one of the studio's own files (a
        template inside the installed package) or its folder is not writable: then the user's
        documents folder."""
        return default_export_dir(self.port.document_path)

    def export(self, fmt: str, run_id: int | None = None) -> ExportDialog:
        """Start exporting run ``run_id`` as ``fmt`` and show the dialog; returns it. Without ``run_id``
        (one click): the best checkpoint of the newest completed run of the current run's graph
        (:func:`exporters.run_source.one_click_run`), or else the graph being edited."""
        from exporters import from_graph, from_run

        current = self.current_run() if run_id is None else None
        if run_id is not None or current is not None:
            def make() -> Any:
                from exporters.run_source import one_click_run

                chosen = run_id if run_id is not None else one_click_run(current, self.db_url)
                assert chosen is not None   # one_click_run gives a run for a current run
                return from_run(chosen, store=self.db_url)
        else:
            graph = self.port.graph.copy()  # the user may keep editing while it exports

            def make() -> Any:
                return from_graph(graph)
        dialog = ExportDialog(make, fmt, self.export_dir(), parent=self.port.host,
                              untrained=run_id is None and current is None)
        dialog.node_chosen.connect(self.port.reveal)
        dialog.done.connect(lambda ok, d=dialog: self._log(d, ok))
        self.dialogs = [d for d in self.dialogs if d.isVisible() or not d.finished_export] + [dialog]
        dialog.show()
        dialog.start()
        return dialog

    def _log(self, dialog: ExportDialog, ok: bool) -> None:
        if dialog.report is not None:
            level = "info" if ok else "warning"
            self.port.log(f"{dialog.windowTitle()}: {dialog.verdict.text()} ({dialog.report.path})", level)
        else:
            self.port.log(f"{dialog.windowTitle()} failed: {dialog.status.text()}", "warning")

    def close_guard(self) -> bool:
        """Let the window close after any export still running has ended (it writes files)."""
        for dialog in self.dialogs:
            dialog.wait()
        return True


def _preview() -> int:
    import tempfile

    from exporters import from_graph
    from graph_editor.model import load_graph

    from .preview import preview

    graph_path = sys.argv[1] if len(sys.argv) > 1 else str(Path(__file__).resolve().parents[1] / "assets" /
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
