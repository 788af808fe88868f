"""The problems list: every error and warning of the graph; clicking one selects its node."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QLabel, QListWidget, QListWidgetItem, QVBoxLayout, QWidget

from graph_editor.model import Problem

from ..resources import IconSet

NODE_ROLE = Qt.ItemDataRole.UserRole
SEVERITY_ROLE = Qt.ItemDataRole.UserRole + 1   # "error" or "warning": what the line's icon shows
ERROR_COLOR, WARNING_COLOR = "#e5534b", "#d29922"  # readable on the dark and the light theme


class ProblemsDock(QWidget):
    """Errors first, then warnings, each as "node: message"."""

    node_chosen = Signal(str)

    def __init__(self, icons: IconSet | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.icons = icons or IconSet()
        self.header = QLabel()
        self.list = QListWidget()
        self.list.setWordWrap(True)
        self.list.setAlternatingRowColors(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.setSpacing(4)
        layout.addWidget(self.header)
        layout.addWidget(self.list)
        self.list.itemClicked.connect(self._on_clicked)
        self.list.itemActivated.connect(self._on_clicked)
        self._sources: dict[str, list[Problem]] = {}
        self.set_problems([])

    def set_problems(self, problems: Sequence[Problem], source: str = "graph") -> None:
        """Show ``problems`` from ``source`` (the graph's validation and analysis, or another view such
        as a run's inspection), keeping what the other sources reported."""
        self._sources[source] = list(problems)
        self.list.setEnabled(True)
        problems = [p for entries in self._sources.values() for p in entries]
        ordered = sorted(problems, key=lambda p: (p.severity != "error", p.node or ""))
        self.list.clear()
        for p in ordered:
            icon = (self.icons.icon("error", ERROR_COLOR) if p.severity == "error"
                    else self.icons.icon("warning", WARNING_COLOR))
            item = QListWidgetItem(icon, str(p))
            item.setData(NODE_ROLE, p.node)
            item.setData(SEVERITY_ROLE, p.severity)
            item.setToolTip(str(p) + ("\nClick to select the node." if p.node else ""))
            self.list.addItem(item)
        errors = sum(p.severity == "error" for p in problems)
        warnings = len(problems) - errors
        if not problems:
            self.header.setText("No problems: the graph is valid.")
        else:
            parts = [f"{errors} error{'s' * (errors != 1)}"] if errors else []
            parts += [f"{warnings} warning{'s' * (warnings != 1)}"] if warnings else []
            self.header.setText(", ".join(parts))

    def show_checking(self) -> None:
        """The graph changed and its check runs off the GUI thread: the problems listed are of the graph as it
        was (greyed until the new verdict replaces them)."""
        self.header.setText("Checking the edited graph…")
        self.list.setEnabled(False)

    def count(self) -> int:
        return self.list.count()

    def _on_clicked(self, item: QListWidgetItem) -> None:
        node = item.data(NODE_ROLE)
        if node:
            self.node_chosen.emit(node)


if __name__ == "__main__":
    from studio.preview import preview

    def _make() -> ProblemsDock:
        dock = ProblemsDock()
        dock.set_problems([
            Problem("fc1", "Linear fc1 expects 400 input features, receives 16 (add a Flatten)"),
            Problem("output", "input 'in' is not connected", port="in"),
            Problem("relu3", "does not lead to the Output: its result is unused", severity="warning"),
        ])
        return dock

    raise SystemExit(preview(_make, "Problems", (460, 220)))
