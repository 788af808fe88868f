"""The Inspector's sweep variables: one line per parameter a sweep of the design can search (a width, a
dropout p, a head count). Empty: not swept; ``16..64:step16`` or ``0.1|0.3|0.5``: swept over that range,
drawn on the canvas and offered to a new sweep (Experiments > New Sweep)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from PySide6.QtWidgets import QFormLayout, QLabel, QLineEdit, QWidget

from graph_editor.model import Node
from graph_editor.model.sweep_vars import sweepable, variables
from graph_editor.ui.controller import EditorController


class Row(Protocol):
    """The Inspector's field row: an editor with the reason for a refused value beneath it."""

    editor: QWidget

    def show_error(self, reason: str | None) -> None: ...


def add_sweep_rows(form: QFormLayout, controller: EditorController, node: Node,
                   row_type: Callable[[QLineEdit], Row]) -> dict[str, Row]:
    """Add the node's sweep lines to ``form``; each commits on Enter or leaving it (one undo step)."""
    names = sweepable(controller.graph, node.id)
    if not names:
        return {}
    title = QLabel("Sweep (searched by Experiments > New Sweep)")
    title.setObjectName("inspectorSection")
    form.addRow(title)
    swept = variables(controller.graph)
    rows: dict[str, Row] = {}
    for name in names:
        edit = QLineEdit(swept.get(f"{node.id}.{name}", ""), placeholderText="not swept: e.g. 16..64:step16 or 0.1|0.3")
        edit.setObjectName(f"sweep_{name}")
        edit.setToolTip(f"node.{node.id}.{name} in a sweep's space: LOW..HIGH (:log, :stepN) or A|B|C; empty: fixed")
        row = rows[name] = row_type(edit)

        def commit(e: QLineEdit = edit, r: Row = row, param: str = name) -> None:
            if e.text().strip() == variables(controller.graph).get(f"{node.id}.{param}", ""):
                r.show_error(None)
                return
            r.show_error(controller.set_sweep(node.id, param, e.text()))

        edit.editingFinished.connect(commit)
        form.addRow(f"⇄ {name}", row)   # type: ignore[call-overload]  # a FieldRow: a QWidget
    return rows
