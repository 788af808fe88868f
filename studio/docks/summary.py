"""The summary: one row per node (output shape, parameters, FLOPs, activation bytes) and totals.

It shows what :class:`~graph_editor.ui.live.LiveAnalysis` emits on ``analyzed``; while the
graph has errors nothing can be measured, so it shows what validation knows (every node, with
its output shape where it could be inferred) and says what to fix for the rest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt, Signal
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QLabel, QTableView, QVBoxLayout, QWidget

from graph_editor.model import units

from .. import format as fmt

COLUMNS = ("Node", "Type", "Output", "Params", "FLOPs", "Activations")
NUMERIC = {3, 4, 5}
RESIZE_ROWS = 200  # columns fit the widest of this many rows (Qt's default, 1,000, cost 0.15 s a column on 20,000)
Index = QModelIndex | QPersistentModelIndex


@dataclass(frozen=True)
class KnownRow:
    """A node of a graph that cannot be analysed yet: its shape if validation inferred it."""

    id: str
    type: str
    shape: tuple[int, ...] | None = None
    params: int | None = None
    flops: int | None = None
    activation_bytes: int | None = None


class SummaryModel(QAbstractTableModel):
    """Rows of ``NodeStats`` (any objects with id, type, shape, params, flops, activation_bytes)."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[Any] = []

    def set_rows(self, rows: Sequence[Any]) -> None:
        self.beginResetModel()
        self.rows = list(rows)
        self.endResetModel()

    def rowCount(self, parent: Index = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent: Index = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section]
        return None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        row, col = self.rows[index.row()], index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return _cell(row, col)
        if role == Qt.ItemDataRole.ToolTipRole and col in NUMERIC:
            return f"{_raw(row, col):,}"
        if role == Qt.ItemDataRole.TextAlignmentRole and col in NUMERIC:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.UserRole:
            return row.id
        return None

    def sort(self, column: int, order: Qt.SortOrder = Qt.SortOrder.AscendingOrder) -> None:
        self.layoutAboutToBeChanged.emit()
        key = (lambda r: _raw(r, column)) if column in NUMERIC else (lambda r: _cell(r, column))
        self.rows.sort(key=key, reverse=order == Qt.SortOrder.DescendingOrder)
        self.layoutChanged.emit()


def _raw(row: Any, col: int) -> int:
    value = (row.params, row.flops, row.activation_bytes)[col - 3]
    return -1 if value is None else value


def _cell(row: Any, col: int) -> str:
    if col == 0:
        return row.id
    if col == 1:
        return row.type
    value = (row.shape, row.params, row.flops, row.activation_bytes)[col - 2]
    if value is None:
        return "—"
    if col == 2:
        return fmt.shape(value)
    if col == 3:
        return f"{value:,}"
    if col == 4:
        return units.count(value)
    return units.nbytes(value)


class SummaryDock(QWidget):
    """The per-node table with a totals line; clicking a row selects the node."""

    node_chosen = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = SummaryModel()
        self.table = QTableView()
        self.table.setModel(self.model)
        self.table.setSortingEnabled(True)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setAlternatingRowColors(True)
        self.table.verticalHeader().hide()
        self.table.verticalHeader().setDefaultSectionSize(22)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)  # ids are what vary in length
        header.setStretchLastSection(False)
        header.setResizeContentsPrecision(RESIZE_ROWS)
        self.totals = QLabel()
        self.totals.setWordWrap(True)
        self.totals.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.setSpacing(4)
        layout.addWidget(self.table)
        layout.addWidget(self.totals)
        self.table.clicked.connect(lambda index: self.node_chosen.emit(self.model.rows[index.row()].id))
        self._known: list[KnownRow] = []
        self.show_analysis(None, [])

    def show_inference(self, shapes: Mapping[str, Any], types: Mapping[str, str], order: Sequence[str] = ()) -> None:
        """What validation knows: each node's type and, where inferred, output shape (shown while
        the graph has errors, in place of the analysis)."""
        listed = set(order)
        ids = [i for i in order if i in types] + [i for i in types if i not in listed]
        self._known = [KnownRow(i, types[i], tuple(shapes[i]) if i in shapes else None) for i in ids]
        # The analysis follows in the background (seconds on a big graph): rows of other nodes (another
        # graph opened, layers added or removed) give way to what validation knows at once.
        if [r.id for r in self.model.rows] != [r.id for r in self._known]:
            self.model.set_rows(self._known)
            self.totals.setText("Analysing…")

    def show_analysis(self, analysis: Any, problems: Sequence[Any] = ()) -> None:
        """Show an ``Analysis`` (or, when None, why there is none)."""
        if analysis is None:
            errors = sum(getattr(p, "severity", "error") == "error" for p in problems)
            self.model.set_rows(self._known if errors else [])
            self.totals.setText(f"Fix the {errors} problem{'s' * (errors != 1)} to see parameters, FLOPs and "
                                "memory; shapes are shown where they are known." if errors else "Analysing…")
            return
        self.model.set_rows(analysis.nodes)
        for col in range(1, len(COLUMNS)):
            self.table.resizeColumnToContents(col)
        self.totals.setText(
            f"<b>{analysis.total_params:,}</b> parameters ({analysis.trainable_params:,} trainable) · "
            f"<b>{units.count(analysis.total_flops)}</b> FLOPs · "
            f"<b>{units.nbytes(analysis.activation_bytes)}</b> activations at batch {analysis.batch} · "
            f"output {fmt.shape(analysis.output_shape)}")


if __name__ == "__main__":
    from graph_editor.analysis import analyze
    from graph_editor.model import load_graph
    from studio.preview import preview
    from studio.resources import TEMPLATES

    def _make() -> SummaryDock:
        dock = SummaryDock()
        dock.show_analysis(analyze(load_graph(TEMPLATES / "lenet5.graph.json")))
        return dock

    raise SystemExit(preview(_make, "Summary", (640, 420)))
