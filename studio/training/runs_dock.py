"""The runs dock: every run in the store, filtered and sorted; overlay, diff, open, delete.

The store is polled every few seconds (cheap indexed queries on a WAL SQLite file), so a run that
a worker left going in the background shows live, and one whose worker died shows as
interrupted/failed with its reason. Several selected runs overlay their curves; two give a graph
diff; "Open graph" hands a run's graph to the shell through the ``open_graph`` callback; "Delete"
asks through the window's :class:`~studio.prompts.Prompts` first. One selected run shows its last
validation confusion matrix that has a checkpoint of its epoch; a click on a cell re-evaluates that
checkpoint for the samples, so they are the matrix's own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    QPersistentModelIndex,
    QSortFilterProxyModel,
    Qt,
    QTimer,
)
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QSplitter,
    QTableView,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from trainer.protocol.events import PerClass, ProtocolError
from trainer.store.runs import RunStore, StoreError

from ..prompts import Prompts, ask_delete_runs
from .cell_samples import Ask, CellSamples
from .compare import matches, parse_filter, recipe_diff, shown_pair
from .confusion import ConfusionPanel
from .dashboard import format_duration
from .graph_diff import diff_graphs
from .plot_theme import PlotTheme, plot_theme
from .run_compare_view import CompareCurves, RunNotes
from .run_history import (
    ConfusionSource,
    RunRow,
    confusion_source,
    delete_run,
    describe_runs,
    lr_changes,
    run_graph,
    run_rows,
    start_line,
)

COLUMNS = ("id", "name", "status", "graph", "dataset", "best val acc", "params", "duration", "device", "started",
           "tags")
STATUS_COLORS = {"running": "#0072B2", "completed": "#1b7a3d", "failed": "#b3261e", "interrupted": "#b3261e",
                 "stopped": "#8a5a00", "early_stopped": "#1b7a3d", "pruned": "#9c3f7a"}
STATUS_COLORS_DARK = {"running": "#56B4E9", "completed": "#5cc98a", "failed": "#ff7b72", "interrupted": "#ff7b72",
                      "stopped": "#e0a040", "early_stopped": "#5cc98a", "pruned": "#e08cc0"}
POLL_MS = 2000
RESIZE_ROWS = 100   # rows the columns are sized to

Index = QModelIndex | QPersistentModelIndex


class RunsModel(QAbstractTableModel):
    """Rows of :class:`RunRow`; ``Qt.UserRole`` gives sortable raw values."""

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self.rows: list[RunRow] = []
        self.status_colors = STATUS_COLORS

    def set_rows(self, rows: list[RunRow]) -> None:
        if [r.id for r in rows] == [r.id for r in self.rows]:
            # Same runs: update in place so selection and scroll stay, and say only which rows changed
            # (a poll of 1,000 finished runs then costs the proxy no re-filtering and no re-sorting).
            changed = [i for i, (old, new) in enumerate(zip(self.rows, rows, strict=True)) if old != new]
            self.rows = rows
            if changed:
                self.dataChanged.emit(self.index(changed[0], 0), self.index(changed[-1], len(COLUMNS) - 1))
            return
        self.beginResetModel()
        self.rows = rows
        self.endResetModel()

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: N802, B008
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: N802, B008
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole) -> Any:  # noqa: N802
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return COLUMNS[section]
        return None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        r, col = self.rows[index.row()], COLUMNS[index.column()]
        if role == Qt.ItemDataRole.DisplayRole:
            return _display(r, col)
        if role == Qt.ItemDataRole.UserRole:
            return _sort_key(r, col)
        if role == Qt.ItemDataRole.ToolTipRole and col == "tags" and r.tags:
            return "\n".join(r.tags)           # the whole list, where the cell shows its start
        if role == Qt.ItemDataRole.ToolTipRole and r.error:
            return r.error
        if role == Qt.ItemDataRole.ForegroundRole and col == "status":
            return QColor(self.status_colors.get(r.status, "#888888"))
        if role == Qt.ItemDataRole.TextAlignmentRole and col in ("id", "best val acc", "params", "duration"):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None


def _display(r: RunRow, col: str) -> str:
    if col == "best val acc":
        return "" if r.best is None else f"{r.best:.4f}"
    if col == "params":
        return f"{r.params:,}"
    if col == "duration":
        return "" if r.seconds is None else format_duration(r.seconds)
    if col == "status":
        return r.status.replace("_", " ")
    if col == "tags":
        return ", ".join(_short_tag(t) for t in r.tags)
    return str(getattr(r, col))


def _short_tag(tag: str, most: int = 24) -> str:
    """A tag as the table shows it: a long one (a study's name) keeps its start and end, so the tags
    after it (``trial:N``) stay in view; the tooltip and the filter have it whole."""
    return tag if len(tag) <= most else f"{tag[:most - 11]}…{tag[-10:]}"


def _sort_key(r: RunRow, col: str) -> Any:
    if col == "best val acc":
        return -1.0 if r.best is None else r.best
    if col == "duration":
        return -1.0 if r.seconds is None else r.seconds
    if col == "tags":
        return ", ".join(r.tags)
    return getattr(r, col) if col != "started" else r.started


class RunsFilter(QSortFilterProxyModel):
    """The filter box's rule (:func:`.compare.parse_filter`): words in any column, ``tag:NAME``,
    ``FIELD=VALUE`` on any recipe field."""

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self.rule = parse_filter("")

    def set_text(self, text: str) -> None:
        self.beginFilterChange()
        self.rule = parse_filter(text)
        self.endFilterChange()

    def filterAcceptsRow(self, row: int, parent: Index) -> bool:  # noqa: N802
        model = self.sourceModel()
        if not isinstance(model, RunsModel) or row >= len(model.rows):
            return True
        r = model.rows[row]
        text = " ".join(_display(r, c) for c in COLUMNS if c != "tags") + " " + " ".join(r.tags) + " " + r.recipe
        return matches(self.rule, text, r.tags, r.spec)


class RunsPanel(QWidget):
    """The dock's contents. ``open_graph(graph_dict, title)`` is the shell's way to open a graph;
    ``prompts`` (the window's) asks before a delete; without it a message box of its own asks."""

    def __init__(self, store: RunStore, open_graph: Callable[[dict[str, Any], str], None] | None = None,
                 parent: QWidget | None = None, *, prompts: Prompts | None = None) -> None:
        super().__init__(parent)
        self.store = store
        self.open_graph = open_graph
        self.prompts = prompts
        self._overlaid: list[int] = []
        self._best_cache: dict[int, tuple[float | None, float | None]] = {}   # ended runs: best, seconds
        self._confusion_run: int | None = None      # the run whose matrix the Confusion tab shows...
        self._confusion_epoch = -1                   # ...and the epoch it was read at
        self._confusion_source: ConfusionSource | None = None   # its matrix and the checkpoint of that epoch
        self.model = RunsModel(self)
        self.proxy = RunsFilter(self)
        self.proxy.setSourceModel(self.model)
        self.proxy.setSortRole(Qt.ItemDataRole.UserRole)
        self._build()
        self.timer = QTimer(self, interval=POLL_MS)
        self.timer.timeout.connect(self.refresh)
        self.timer.start()
        self.refresh()

    def _build(self) -> None:
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        top = QHBoxLayout()
        self.filter = QLineEdit(placeholderText="Filter runs: words, tag:NAME, optim.name=sgd, lr<0.01, batch_size=64")
        self.filter.textChanged.connect(self.proxy.set_text)
        self.filter.setMinimumWidth(180)     # a narrow dock squeezes the buttons' margins, not the filter to "Fi..."
        top.addWidget(self.filter, 1)
        self.buttons: dict[str, QPushButton] = {}
        for name, slot in (("Overlay", self.overlay_selected), ("Diff", self.diff_selected),
                           ("Open graph", self.open_selected), ("Delete", self.delete_selected)):
            b = QPushButton(name)
            b.clicked.connect(slot)
            self.buttons[name] = b
            top.addWidget(b)
        lay.addLayout(top)
        self.table = QTableView()
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(0, Qt.SortOrder.DescendingOrder)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.table.verticalHeader().setVisible(False)
        self.table.setWordWrap(False)         # a long tag list ends in "..." on one line (its tooltip has all)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        # Columns fit the first rows, not all: with 1,000 runs, measuring every cell took 3.5 of the
        # 4.3 s the panel needed to show (benchmarks/runs_1000.py).
        self.table.horizontalHeader().setResizeContentsPrecision(RESIZE_ROWS)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.selectionModel().selectionChanged.connect(self._show_details)
        rows = self.table.verticalHeader().defaultSectionSize()   # the table shows at least 8 runs
        self.table.setMinimumHeight(self.table.horizontalHeader().sizeHint().height() + 8 * rows + 4)
        self.tabs = QTabWidget()
        curves = self.curves = CompareCurves()
        self.metric_box, self.plot = curves.metric_box, curves.plot
        curves.changed.connect(self.overlay_selected)
        self.diff_text = QPlainTextEdit(readOnly=True)
        self.details = QLabel("Select a run.")
        self.details.setWordWrap(True)
        self.details.setAlignment(Qt.AlignmentFlag.AlignTop)
        self.details.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.notes = RunNotes()
        self.notes.saved.connect(lambda _run: self.refresh())
        details = QWidget()
        dl = QVBoxLayout(details)
        dl.setContentsMargins(0, 0, 0, 0)
        dl.addWidget(self.details, 1)
        dl.addWidget(self.notes)
        self.tabs.addTab(curves, "Curves")
        self.tabs.addTab(self.diff_text, "Diff")
        self.tabs.addTab(details, "Details")
        self.confusion = ConfusionPanel()
        self.samples = CellSamples(self.confusion, self)   # the samples of the cell clicked last
        self.confusion.gallery.setMinimumHeight(130)     # a shorter tab than the dashboard's: one row of samples
        self.confusion.samples_requested.connect(self._load_samples)
        self.tabs.addTab(self.confusion, "Confusion")
        for page in (curves, self.confusion):   # the tabs give way to the table, not the window to the tabs
            page.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Ignored)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.table)
        split.addWidget(self.tabs)
        split.setChildrenCollapsible(False)
        split.setStretchFactor(0, 2)
        split.setStretchFactor(1, 3)
        lay.addWidget(split, 1)

    def set_plot_theme(self, theme: str | PlotTheme) -> None:
        """Status colours readable in the light or dark theme (the overlay plot is themed on its own)."""
        self.model.status_colors = STATUS_COLORS_DARK if plot_theme(theme).name == "dark" else STATUS_COLORS
        if self.model.rows:
            self.model.dataChanged.emit(self.model.index(0, 0), self.model.index(len(self.model.rows) - 1,
                                                                                 len(COLUMNS) - 1))

    # ------------------------------------------------------------------ data
    def refresh(self) -> None:
        """Re-read the store; overlaid curves of running runs are re-read too."""
        try:
            rows = run_rows(self.store, self._best_cache)
        except (StoreError, OSError) as exc:
            self.details.setText(f"Cannot read the run store: {exc}")
            return
        self.model.set_rows(rows)
        self._show_details()           # the selected run's status, epoch and duration, as they change
        if any(r.status == "running" and r.id in self._overlaid for r in rows):
            self._draw_overlay(self._overlaid)
        shown = self.row(self._confusion_run) if self._confusion_run is not None else None
        if shown is not None and shown.epoch != self._confusion_epoch:   # a running run finished an epoch
            self._read_confusion(shown.id)

    def row(self, run_id: int) -> RunRow | None:
        return next((r for r in self.model.rows if r.id == run_id), None)

    def selected_ids(self) -> list[int]:
        rows = {self.proxy.mapToSource(i).row() for i in self.table.selectionModel().selectedRows()}
        return sorted(self.model.rows[r].id for r in rows)

    def select_ids(self, ids: list[int]) -> None:
        sel = self.table.selectionModel()
        sel.clearSelection()
        flags = sel.SelectionFlag.Select | sel.SelectionFlag.Rows
        for view_row in range(self.proxy.rowCount()):
            src = self.proxy.mapToSource(self.proxy.index(view_row, 0)).row()
            if self.model.rows[src].id in ids:
                sel.select(self.proxy.index(view_row, 0), flags)

    # --------------------------------------------------------------- actions
    def overlay_selected(self) -> None:
        self._overlaid = self.selected_ids()
        self._draw_overlay(self._overlaid)
        self.tabs.setCurrentIndex(0)

    def _draw_overlay(self, ids: list[int]) -> None:
        def name(run_id: int) -> str:
            row = self.row(run_id)
            return f"run {run_id}" + (f" {row.name}" if row and row.name else "")
        self.curves.draw(self.store, ids, name)

    def diff_selected(self) -> None:
        ids = self.selected_ids()
        self.tabs.setCurrentIndex(1)
        if len(ids) != 2:
            self.diff_text.setPlainText("Select exactly two runs to compare their recipes and graphs.")
            return
        a, b = (run_graph(self.store, i) for i in ids)
        lines = diff_graphs(a, b).lines()
        recipe = recipe_diff(*(self.store.run(i).spec or {} for i in ids))
        shown = [f"  {path}: {' -> '.join(shown_pair(x, y))}" for path, x, y in recipe
                 if path not in ("name", "model.graph")] or ["  the same recipe"]
        self.diff_text.setPlainText(f"From run {ids[0]} to run {ids[1]}:\nRecipe:\n" + "\n".join(shown)
                                    + "\nGraph:\n" + "\n".join(lines))

    def open_selected(self) -> None:
        ids = self.selected_ids()
        if len(ids) != 1 or self.open_graph is None:
            self.details.setText("Select one run to open its graph." if self.open_graph else
                                 "Opening graphs needs the studio window.")
            self.tabs.setCurrentIndex(2)
            return
        row = self.row(ids[0])
        self.open_graph(run_graph(self.store, ids[0]), f"run {ids[0]} {row.name if row else ''}".strip())

    def delete_selected(self, *, confirm: bool = True) -> list[int]:
        """Delete the selected runs and their files once the user agrees; returns the deleted ids."""
        ids = self.selected_ids()
        if not ids:
            return []
        if confirm:
            description = describe_runs([(i, row.name if (row := self.row(i)) else "") for i in ids])
            ask = self.prompts.delete_runs if self.prompts is not None else ask_delete_runs
            if not ask(self, description):
                return []
        done, problems = [], []
        for run_id in ids:
            try:
                delete_run(self.store, run_id)
                done.append(run_id)
            except (ValueError, StoreError, OSError) as exc:
                problems.append(str(exc))
        for run_id in done:
            self._best_cache.pop(run_id, None)
        self.refresh()
        if problems:
            self.details.setText("\n".join(problems))
            self.tabs.setCurrentIndex(2)
        return done

    def _show_details(self) -> None:
        ids = self.selected_ids()
        if len(ids) != 1:
            return
        r = self.row(ids[0])
        if r is None:
            return
        took = format_duration(r.seconds) if r.seconds is not None else "—"
        text = (f"Run {r.id} {r.name}: {r.status.replace('_', ' ')} at epoch {r.epoch}, step {r.step}, on "
                f"{r.device}, {took}.\nGraph {r.graph}, dataset {r.dataset}, {r.params:,} parameters."
                + (f"\nRecipe: {r.recipe}." if r.recipe else ""))
        if lr := lr_changes(self.store, r.id):
            text += f"\n{lr}"
        model: dict[str, Any] = r.spec["model"] if isinstance(r.spec.get("model"), dict) else {}
        if any(model.get(k) for k in ("init_from", "frozen", "lr_scale", "reinit")):
            text += f"\nStart: {start_line(model)}."
        if r.error:
            text += f"\n\nReason: {r.error}"
        self.details.setText(text)
        self.notes.show_run(self.store, r.id, r.tags, r.notes)
        self._show_confusion(r.id)

    # ------------------------------------------------------------- confusion
    def _show_confusion(self, run_id: int) -> None:
        """The run's newest validation confusion matrix that has a checkpoint of its epoch, as stored;
        a click on a cell re-evaluates that checkpoint on the CPU to show that cell's samples."""
        if run_id == self._confusion_run:
            return
        self._confusion_run = run_id
        self.confusion.clear()
        self._read_confusion(run_id)

    def _read_confusion(self, run_id: int) -> None:
        self.samples.forget()                  # another matrix: an older one's samples are not its own
        row = self.row(run_id)
        self._confusion_epoch = row.epoch if row is not None else -1
        source = self._confusion_source = confusion_source(self.store, run_id)
        if source is None:
            self.confusion.show_message(f"Run {run_id} stored no validation results.")
            return
        report, ckpt = source.report, source.checkpoint
        try:                    # the per-class figures the worker stored with it
            figures = PerClass.from_dict(report["per_class"]) if report.get("per_class") else None
        except ProtocolError:
            figures = None
        kept = f", {ckpt.kind} checkpoint" if ckpt is not None else ""
        # a newer matrix: samples shown so far go stale, the next click reloads
        self.confusion.set_matrix(np.asarray(report["confusion"]), report.get("classes", []),
                                  f"run {run_id}, epoch {report['epoch']}{kept}", per_class=figures)

    def _load_samples(self, t: int, p: int) -> None:
        """The samples of a cell: the re-evaluation of the checkpoint of the epoch the matrix shows."""
        run_id, source = self._confusion_run, self._confusion_source
        if run_id is None or source is None:
            return
        ckpt = source.checkpoint
        if ckpt is None:
            self.samples.forget()
            self.confusion.gallery.show_message(
                f"Run {run_id} kept no checkpoint of epoch {source.report['epoch']} to show its samples from.")
            return
        self.samples.ask(Ask((run_id, ckpt.path), self.store.run(run_id).spec, ckpt.path,
                             f"run {run_id}, {ckpt.kind} checkpoint, epoch {ckpt.epoch}", t, p))

    def wait_samples(self, ms: int = 60_000) -> bool:
        return self.samples.wait(ms)
