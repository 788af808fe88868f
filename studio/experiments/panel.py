"""The Experiments workspace's view: a study chooser, the trials table, the four charts, and what to
do with the best (or the selected) trial: open its graph, export it, retrain it on train+val.

Passive: it shows what it is given (:meth:`ExperimentsPanel.set_studies`, :meth:`set_report`) and
says what the user asked for through its signals; :class:`studio.experiments.ExperimentsHook` reads
the store and acts. Preview: ``python -m studio.experiments.panel DB_URL``.
"""

from __future__ import annotations

import sys
from typing import Any, TypeVar

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSplitter,
    QStackedWidget,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from trainer.sweep.study import brief_reason

from ..elided_label import ElidedLabel
from .charts import HistoryChart, ImportanceChart, IntermediateChart, ParallelChart

FIXED = ("#", "state", "value", "run")
EMPTY = ("<h3>No sweep in this run store yet</h3>"
         "<p>A sweep trains the design many times, each trial an ordinary run, and searches the recipe "
         "and the design's own numbers for the best validation accuracy.</p>"
         "<p>1. On the Design canvas, select a layer and type a range in the Inspector's Sweep lines "
         "(<code>16..64:step16</code>, <code>0.1|0.3|0.5</code>): optional, the learning rate is always searched.<br>"
         "2. Press <b>New Sweep…</b> above (or Run &gt; New Sweep…), choose the trials and the memory budget.<br>"
         "3. Its trials, charts and best trial appear here while it runs.</p>"
         "<p>From a terminal: <code>torch-studio sweep GRAPH --data DATASET --trials 8 --space "
         "lr=1e-4..3e-2:log</code> into the same run store.</p>")


class ExperimentsPanel(QWidget):
    study_chosen = Signal(str)
    open_graph = Signal(int)     # a run id
    export_run = Signal(int)
    retrain = Signal(int)
    new_sweep = Signal()
    stop_sweep = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.report: dict[str, Any] | None = None
        self.study = _named(QComboBox(), "experimentsStudy")
        # a default name (Digits_CNN-sweep-1127-082138) whole; a longer one is cut, never widening the window
        self.study.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.study.setMinimumContentsLength(30)
        self.study.currentTextChanged.connect(self._chosen)
        # one line cut with "…" (the whole in its tooltip): an error naming a long store path had made the
        # window 1985 px wide on a 1440 px screen, the charts and the trial buttons off the screen
        self.status = _named(ElidedLabel("No study yet"), "experimentsStatus")
        self.buttons = {key: _named(QPushButton(text), f"experiments_{key}") for key, text in
                        (("open", "Open Graph"), ("export", "Export ONNX…"), ("retrain", "Retrain on Train+Val"))}
        for key, signal in (("open", self.open_graph), ("export", self.export_run), ("retrain", self.retrain)):
            self.buttons[key].clicked.connect(lambda _=False, s=signal: self._act(s))
            self.buttons[key].setEnabled(False)
        self.new_button = _named(QPushButton("New Sweep…"), "experiments_new")
        self.new_button.setToolTip("A study over the recipe and the design's sweep variables (Inspector > Sweep)")
        self.new_button.clicked.connect(self.new_sweep)
        self.stop_button = _named(QPushButton("Stop Sweep"), "experiments_stop")
        self.stop_button.clicked.connect(self.stop_sweep)
        self.stop_button.setEnabled(False)
        top = QHBoxLayout()
        top.addWidget(self.new_button)
        top.addWidget(self.stop_button)
        top.addWidget(QLabel("Study"))
        top.addWidget(self.study)
        top.addWidget(self.status, 1)
        for b in self.buttons.values():
            top.addWidget(b)
        self.table = _named(QTableWidget(0, len(FIXED)), "experimentsTrials")
        self.table.setHorizontalHeaderLabels(list(FIXED))
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        self.table.setWordWrap(False)
        self.table.itemSelectionChanged.connect(self._update_buttons)
        self.charts = [HistoryChart(), ParallelChart(), ImportanceChart(), IntermediateChart()]
        grid_host = QWidget()
        grid = QGridLayout(grid_host)
        grid.setContentsMargins(0, 0, 0, 0)
        for i, chart in enumerate(self.charts):
            grid.addWidget(chart, i // 2, i % 2)
        self.detail = _named(QLabel(""), "experimentsDetail")
        self.detail.setWordWrap(True)
        left = QWidget()
        column = QVBoxLayout(left)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.table, 1)
        column.addWidget(self.detail)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(left)
        split.addWidget(grid_host)
        split.setStretchFactor(0, 2)
        split.setStretchFactor(1, 3)
        split.setSizes([640, 760])     # the trials table whole with three parameters and a brief reason
        self.split = split
        self.empty = _named(QLabel(EMPTY), "experimentsEmpty")
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty.setWordWrap(True)
        self.empty.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.pages = QStackedWidget()        # the empty state until the store holds a study
        self.pages.addWidget(self.empty)
        self.pages.addWidget(split)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.pages, 1)

    def set_sweeping(self, running: bool) -> None:
        """A sweep started here runs (Stop Sweep enabled) or ended."""
        self.stop_button.setEnabled(running)
        self.new_button.setEnabled(not running)

    def _chosen(self, name: str) -> None:
        if name:
            self.study_chosen.emit(name)

    # ------------------------------------------------------------------ shown
    def set_studies(self, studies: list[dict[str, Any]]) -> None:
        """The studies in the store (newest first); the chosen one stays chosen."""
        names = [s["name"] for s in studies]
        if names == [self.study.itemText(i) for i in range(self.study.count())]:
            return
        keep = self.study.currentText()
        self.pages.setCurrentWidget(self.split if names else self.empty)
        self.study.blockSignals(True)
        self.study.clear()
        self.study.addItems(names)
        self.study.blockSignals(False)
        if names:
            self.study.setCurrentText(keep if keep in names else names[0])
            self.study_chosen.emit(self.study.currentText())

    def set_report(self, report: dict[str, Any]) -> None:
        """Show a study report (:func:`trainer.sweep.report.study_report`); the selection is kept."""
        self.report = report
        chosen = self.selected_trial()
        trials = report["trials"]
        names = sorted({k for t in trials for k in t["params"]})
        headers = [*FIXED, *(n.removeprefix("node.") for n in names), "reason"]
        self.table.setSortingEnabled(False)
        self.table.setColumnCount(len(headers))
        self.table.setHorizontalHeaderLabels(headers)
        self.table.setRowCount(len(trials))
        for row, t in enumerate(trials):
            cells = [t["number"], t["state"], "" if t["value"] is None else f"{t['value']:.4f}",
                     "" if t["run_id"] is None else t["run_id"],
                     *[_fmt(t["params"].get(n)) for n in names], brief_reason(t["reason"])]
            for col, value in enumerate(cells):
                item = QTableWidgetItem()
                item.setData(Qt.ItemDataRole.DisplayRole, value)
                if col == len(cells) - 1:
                    item.setToolTip(t["reason"])     # the whole reason; the cell says it in a few words
                self.table.setItem(row, col, item)
            if chosen is not None and t["number"] == chosen["number"]:
                self.table.selectRow(row)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(len(headers) - 1, QHeaderView.ResizeMode.Stretch)
        for chart in self.charts:
            chart.show_report(report)
        self.status.setText(_status(report))
        self._update_buttons()

    def selected_trial(self) -> dict[str, Any] | None:
        rows = self.table.selectionModel().selectedRows() if self.table.selectionModel() else []
        if not rows or self.report is None:
            return None
        item = self.table.item(rows[0].row(), 0)
        number = item.data(Qt.ItemDataRole.DisplayRole) if item is not None else None
        return next((t for t in self.report["trials"] if t["number"] == number), None)

    def target(self) -> dict[str, Any] | None:
        """The selected trial if it has a run, else the best trial."""
        chosen = self.selected_trial()
        if chosen is not None and chosen["run_id"] is not None:
            return chosen
        return (self.report or {}).get("best")

    def _update_buttons(self) -> None:
        chosen = self.selected_trial()
        if chosen is not None:
            self.detail.setText(f"Trial {chosen['number']} {chosen['state']}"
                                + (f": {chosen['reason']}" if chosen["reason"] else ""))
        else:
            self.detail.setText("Choose a trial for its details; the buttons act on it, else on the best trial.")
        target = self.target()
        ok = target is not None and target.get("run_id") is not None
        which = "" if target is None else f" (trial {target['number']})"
        for button in self.buttons.values():
            button.setEnabled(ok)
            button.setToolTip(f"{button.text().rstrip('…')}{which}" if ok else "no trial with a run chosen")

    def _act(self, signal: Any) -> None:
        target = self.target()
        if target is not None and target.get("run_id") is not None:
            signal.emit(int(target["run_id"]))


W = TypeVar("W", bound=QWidget)


def _named(widget: W, name: str) -> W:
    widget.setObjectName(name)
    return widget


def _fmt(value: Any) -> Any:
    return f"{value:.3g}" if isinstance(value, float) else ("" if value is None else value)


def _status(report: dict[str, Any]) -> str:
    counts: dict[str, int] = {}
    for t in report["trials"]:
        counts[t["state"]] = counts.get(t["state"], 0) + 1
    parts = ", ".join(f"{n} {s}" for s, n in counts.items())
    best = report.get("best")
    text = f"{len(report['trials'])} trials ({parts})"
    if best:
        text += f"; best: trial {best['number']}, {report['metric']} {best['value']:.4f}"
    return text + ("  ● live" if report.get("running") else "")


def _preview() -> int:
    from PySide6.QtWidgets import QApplication

    from trainer.sweep.report import list_studies, storage_for_reading, study_report

    app = QApplication.instance() or QApplication(sys.argv[:1])
    storage = storage_for_reading(sys.argv[1])
    panel = ExperimentsPanel()
    panel.study_chosen.connect(lambda name: panel.set_report(study_report(storage, name)) if storage else None)
    panel.set_studies(list_studies(storage))
    panel.resize(1400, 800)
    panel.show()
    return int(app.exec())


if __name__ == "__main__":
    sys.exit(_preview())
