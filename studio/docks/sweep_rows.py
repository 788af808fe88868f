"""The Inspector's sweep variables: one line per parameter a sweep of the design can search (a width, a
dropout p, a head count, a block's repeat count). Empty: not swept; ``16..64:step16`` or ``0.1|0.3|0.5``:
swept over that range, drawn on the canvas and offered to a new sweep (Experiments > New Sweep). A
selected block also gets its repeat count (the copies of it in a chain)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from PySide6.QtWidgets import QFormLayout, QLabel, QLineEdit, QSpinBox, QWidget

from graph_editor.model import Node
from graph_editor.model.graph import Group
from graph_editor.model.repeat import MAX_REPEAT
from graph_editor.model.sweep_vars import REPEAT, sweepable, variables
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
        # short enough for the Inspector's width (its "... or 0.1|0.3" was cut); the tooltip has the syntax
        example = "16..64:step16" if node.spec is not None and node.spec.param(name).kind == "int" else "0.1..0.5"
        edit = QLineEdit(swept.get(f"{node.id}.{name}", ""), placeholderText=f"not swept: e.g. {example}")
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


def add_block_rows(form: QFormLayout, controller: EditorController, group: Group,
                   row_type: Callable[[QWidget], Row]) -> dict[str, Row]:
    """A block's repeat count and its sweep line; each commits on Enter or leaving it (one undo step)."""
    count = QSpinBox()
    count.setObjectName("blockRepeat")
    count.setRange(1, MAX_REPEAT)
    count.setKeyboardTracking(False)
    count.setValue(group.repeat)
    count.setToolTip("How many copies of this block run in a chain (each fed by the one before); drawn ×N")
    key = f"{group.id}.{REPEAT}"
    line = QLineEdit(variables(controller.graph).get(key, ""), placeholderText="not swept: e.g. 1..4 or 1|2|4")
    line.setObjectName(f"sweep_{REPEAT}")
    line.setToolTip(f"block.{key} in a sweep's space: LOW..HIGH or A|B|C; empty: fixed")
    rows = {"repeat": row_type(count), "sweep": row_type(line)}

    def commit_count() -> None:
        if count.value() != controller.graph.groups[group.id].repeat:
            rows["repeat"].show_error(controller.set_repeat(group.id, count.value()))

    def commit_sweep() -> None:
        if line.text().strip() != variables(controller.graph).get(key, ""):
            rows["sweep"].show_error(controller.set_sweep(group.id, REPEAT, line.text()))

    count.editingFinished.connect(commit_count)
    line.editingFinished.connect(commit_sweep)
    form.addRow("Repeat", rows["repeat"])   # type: ignore[call-overload]  # a FieldRow: a QWidget
    form.addRow(f"⇄ {REPEAT}", rows["sweep"])   # type: ignore[call-overload]
    return rows
