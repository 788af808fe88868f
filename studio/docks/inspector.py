"""The inspector: the selected node's label and parameters, or the network's input and classes.

Editors are generated from each parameter's schema (:mod:`.param_editors`). An edit goes to
the controller as one undo step; a value the model refuses is not applied and its reason is
shown under the field. The inspector follows the model's events, so undo, redo and edits made
elsewhere show here at once.

No editor is destroyed inside its own signal: a commit from a spin box's arrow click runs inside
that spin box's mouse handler, and the model events it causes must not delete the spin box under
it (that was a segfault). Values the model changes are shown in place; a page that must be built
anew (another selection, a removed node, a replaced graph) replaces the shown one, which is
retired with ``deleteLater``; rebuilds caused by model events are deferred to the event loop and
coalesced, and commits from editors of a retired page are ignored.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QEvent, QObject, Qt, QTimer
from PySide6.QtGui import QKeyEvent, QKeySequence
from PySide6.QtWidgets import (
    QAbstractSpinBox,
    QComboBox,
    QFormLayout,
    QFrame,
    QLabel,
    QLineEdit,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from graph_editor.model import Graph, InputSpec, Node, ParamError
from graph_editor.model.graph import DTYPES
from graph_editor.ui.controller import EditorController

from .. import format as fmt
from .param_editors import ParamEditor, StrictSpinBox, make_editor
from .sweep_rows import Row, add_block_rows, add_sweep_rows


class FieldRow(QWidget):
    """An editor with the reason for a refused value shown beneath it."""

    def __init__(self, editor: QWidget, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.editor = editor
        self.error = QLabel(objectName="fieldError", wordWrap=True)
        self.error.hide()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(editor)
        layout.addWidget(self.error)

    def show_error(self, reason: str | None) -> None:
        self.error.setText(reason or "")
        self.error.setVisible(bool(reason))


class InspectorDock(QWidget):
    """Edits the selection through an :class:`EditorController`."""

    def __init__(self, controller: EditorController, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.controller = controller
        self.node_id: str | None = None
        self.rows: dict[str, FieldRow] = {}
        self.editors: dict[str, ParamEditor] = {}
        self.sweep_rows: dict[str, Row] = {}          # parameter -> its sweep range line
        self.block_rows: dict[str, Row] = {}          # a selected block's repeat count and its sweep line
        self._shapes: dict[str, tuple[int, ...]] = {}
        self._ports: dict[str, list[tuple[int, ...]]] = {}  # every output's shape, nodes with several
        self._graph: Graph | None = None
        self._rebuild_pending = False
        self.scroll = QScrollArea(widgetResizable=True, frameShape=QFrame.Shape.NoFrame)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.scroll)
        controller.selection_changed.connect(self._on_selection_changed)
        controller.graph_replaced.connect(self._follow)
        self._follow(controller.graph)

    # ------------------------------------------------------------ following
    def _follow(self, graph: Graph) -> None:
        if self._graph is not None:
            self._graph.events.params_changed.disconnect(self._on_params_changed)
            self._graph.events.spec_changed.disconnect(self._on_spec_changed)
            self._graph.events.node_removed.disconnect(self._on_node_removed)
        self._graph = graph
        graph.events.params_changed.connect(self._on_params_changed)
        graph.events.spec_changed.connect(self._on_spec_changed)
        graph.events.node_removed.connect(self._on_node_removed)
        self._shapes, self._ports = {}, {}
        self.rebuild()

    def _on_selection_changed(self, _ids: list) -> None:
        self.rebuild()

    def _on_params_changed(self, node_id: str, name: str) -> None:
        if node_id != self.node_id or self._graph is None:
            return
        node = self._graph.nodes[node_id]
        if name in self.editors:
            self.editors[name].set_value(node.params.get(name))
            self.rows[name].show_error(None)
        elif name == "label" and "label" in self.rows:
            self.rows["label"].editor.setText(node.label)
            self.header.setText(_header(node))

    def _on_spec_changed(self) -> None:
        if self.node_id is not None or self._graph is None or "num_classes" not in self.rows:
            return
        spec, classes = self._graph.input_spec, self._graph.num_classes
        shape, dtype, count = (self.rows[k].editor for k in ("input_shape", "dtype", "num_classes"))
        for editor in (shape, dtype, count):
            editor.blockSignals(True)
        try:
            if _parsed(shape.text()) != spec.shape:
                shape.setText(_shape_text(spec.shape))
            dtype.setCurrentText(spec.dtype)
            count.setValue(classes)
        finally:
            for editor in (shape, dtype, count):
                editor.blockSignals(False)
        for key in ("input_shape", "dtype", "num_classes"):
            self.rows[key].show_error(None)

    def _on_node_removed(self, node_id: str) -> None:
        if node_id == self.node_id:
            self.schedule_rebuild()

    def show_shapes(self, shapes: dict[str, tuple[int, ...]],
                    ports: dict[str, list[tuple[int, ...]]] | None = None) -> None:
        """Output shapes from live validation, shown for the selected node: ``shapes`` the first
        output's, ``ports`` every output's of the nodes with several (Split, Chunk, Unbind)."""
        self._shapes, self._ports = dict(shapes), dict(ports or {})
        if hasattr(self, "shape_label") and self.node_id is not None:
            self._show_node_shapes(self.node_id)

    def _show_node_shapes(self, node_id: str) -> None:
        ports = self._port_rows(node_id)
        self.shape_title.setText("Outputs" if len(ports) > 1 else "Output")
        if len(ports) > 1:   # one line per output port, numbered as on the canvas
            width = len(ports[-1][0])
            self.shape_label.setText("\n".join(f"{name:>{width}}   {text}" for name, text in ports))
        else:
            self.shape_label.setText(self._shape_text(node_id))

    # ------------------------------------------------------------ building
    def schedule_rebuild(self) -> None:
        """Rebuild once the event loop is back (several requests make one rebuild)."""
        if not self._rebuild_pending:
            self._rebuild_pending = True
            QTimer.singleShot(0, self, self._deferred_rebuild)

    def _deferred_rebuild(self) -> None:
        if self._rebuild_pending:
            self.rebuild()

    def rebuild(self) -> None:
        """Show the editors for the current selection (the page shown so far is deleted later)."""
        self._rebuild_pending = False
        graph = self.controller.graph
        ids = [i for i in self.controller.selection if i in graph.nodes]
        self.rows, self.editors, self.sweep_rows, self.block_rows = {}, {}, {}, {}
        page = QWidget()
        form = QFormLayout(page)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.setLabelAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        form.setContentsMargins(10, 10, 10, 10)
        form.setVerticalSpacing(6)
        if len(ids) == 1:
            self.node_id = ids[0]
            self._build_node(form, graph.nodes[ids[0]])
        else:
            self.node_id = None
            self._build_graph(form, graph, len(self.controller.selection))
        for field in (*page.findChildren(QLineEdit), *page.findChildren(QAbstractSpinBox)):
            field.installEventFilter(self)
            text = field if isinstance(field, QLineEdit) else field.lineEdit()
            field.editingFinished.connect(lambda t=text: t.setModified(False))  # committed: nothing of its own to undo
        old = self.scroll.takeWidget()
        self.scroll.setWidget(page)
        if old is not None:
            old.hide()
            old.deleteLater()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """Ctrl+Z (and redo) in a field with no typing of its own pending goes to the graph's undo
        stack: after a committed edit, it undoes that edit rather than nothing."""
        text = watched if isinstance(watched, QLineEdit) else (
            watched.lineEdit() if isinstance(watched, QAbstractSpinBox) else None)
        if (event.type() == QEvent.Type.ShortcutOverride and text is not None and not text.isModified()
                and _is_undo_or_redo(event)):
            event.ignore()   # not the line edit's: the window's Undo/Redo shortcut takes it
            return True
        return super().eventFilter(watched, event)

    def _live(self, name: str, row: FieldRow) -> bool:
        """Whether ``row`` is still the shown row for ``name`` (not one of a retired page)."""
        return self.rows.get(name) is row

    def _build_node(self, form: QFormLayout, node: Node) -> None:
        spec = node.spec
        self.header = QLabel(_header(node), objectName="inspectorTitle", wordWrap=True)
        form.addRow(self.header)
        if spec is not None:
            form.addRow(QLabel(spec.doc, objectName="inspectorDoc", wordWrap=True))
        self.shape_label = QLabel(objectName="inspectorShape")
        self.shape_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.shape_title = QLabel("Output")
        form.addRow(self.shape_title, self.shape_label)
        self._show_node_shapes(node.id)
        label = QLineEdit(node.label, placeholderText=node.id)
        label.setToolTip("A display name for the node; its id stays the same.")
        label_row = self.rows["label"] = FieldRow(label)
        label.editingFinished.connect(
            lambda: self._live("label", label_row) and self._commit_label(node.id, label.text()))
        form.addRow("Label", self.rows["label"])
        if spec is None:
            form.addRow(QLabel(f"Unknown layer type '{node.type}': its parameters cannot be edited."))
            return
        for pspec in spec.params:
            editor = make_editor(pspec)
            editor.set_value(node.params.get(pspec.name, pspec.default))
            self.editors[pspec.name] = editor
            row = self.rows[pspec.name] = FieldRow(editor)
            editor.committed.connect(lambda value, n=node.id, name=pspec.name, r=row:
                                     self._live(name, r) and self.commit(n, name, value))
            editor.refused.connect(row.show_error)
            name_label = QLabel(pspec.name)
            name_label.setToolTip(editor.toolTip())
            form.addRow(name_label, self.rows[pspec.name])
        self.sweep_rows = add_sweep_rows(form, self.controller, node, FieldRow)

    def _build_graph(self, form: QFormLayout, graph: Graph, selected: int) -> None:
        blocks = [graph.groups[i] for i in self.controller.selection if i in graph.groups]
        if selected == 1 and blocks:
            title = f"Block '{blocks[0].name}' · {len(blocks[0].nodes)} layers"
        else:
            title = f"{selected} selected" if selected > 1 else "Network"
        self.header = QLabel(title, objectName="inspectorTitle", wordWrap=True)
        form.addRow(self.header)
        if blocks:
            form.addRow(QLabel("Double-click the block on the canvas to expand it and edit its layers.",
                               objectName="inspectorDoc", wordWrap=True))
        if selected == 1 and blocks:
            self.block_rows = add_block_rows(form, self.controller, blocks[0], FieldRow)
        form.addRow(QLabel("The input every sample has (without the batch dimension) and the number of "
                           "classes the Output must produce.", objectName="inspectorDoc", wordWrap=True))
        shape = QLineEdit(_shape_text(graph.input_spec.shape))
        shape.setToolTip("Per-sample input shape, e.g. 3, 32, 32 for colour images or 64 for tabular rows.")
        dtype = QComboBox()
        dtype.addItems(list(DTYPES))
        dtype.setCurrentText(graph.input_spec.dtype)
        classes = StrictSpinBox("classes")
        classes.setRange(1, 1_000_000)
        classes.setKeyboardTracking(False)
        classes.setValue(graph.num_classes)
        classes.setToolTip("How many classes the network tells apart (the Output's logits).")
        self.rows = {"input_shape": FieldRow(shape), "dtype": FieldRow(dtype), "num_classes": FieldRow(classes)}
        classes.refused.connect(self.rows["num_classes"].show_error)
        form.addRow("Input shape", self.rows["input_shape"])
        form.addRow("Input dtype", self.rows["dtype"])
        form.addRow("Classes", self.rows["num_classes"])
        form.addRow("Nodes", QLabel(f"{len(graph)} nodes, {len(graph.edges)} wires"))
        rows = dict(self.rows)
        shape.editingFinished.connect(lambda: self._live("input_shape", rows["input_shape"]) and self._commit_spec())
        dtype.activated.connect(lambda _i: self._live("dtype", rows["dtype"]) and self._commit_spec())
        classes.valueChanged.connect(
            lambda value: self._live("num_classes", rows["num_classes"]) and self._commit_classes(value))

    def focus_first_field(self) -> None:
        """Put the keyboard in the first parameter (or the label when there is none)."""
        editor = next(iter(self.editors.values()), None)
        target = editor if editor is not None else self.rows.get("label")
        if target is not None:
            target.setFocus()

    # ------------------------------------------------------------ committing
    def commit(self, node_id: str, name: str, value: Any) -> str | None:
        """Apply a parameter edit; returns (and shows) the reason when it is refused."""
        graph = self.controller.graph
        node = graph.nodes.get(node_id)
        if node is None or node.spec is None:
            return None
        try:
            if node.spec.param(name).check(value) == node.params.get(name):
                self._show_error(node_id, name, None)
                return None  # nothing changed: no undo step
        except ParamError:
            pass  # the controller refuses it below, with the same reason
        reason = self.controller.set_param(node_id, name, value)
        self._show_error(node_id, name, reason)
        return reason

    def _show_error(self, node_id: str, name: str, reason: str | None) -> None:
        if node_id == self.node_id and name in self.rows:
            self.rows[name].show_error(reason)

    def _commit_label(self, node_id: str, text: str) -> None:
        node = self.controller.graph.nodes.get(node_id)
        if node is not None and text.strip() != node.label:
            self._show_error(node_id, "label", self.controller.rename(node_id, text.strip()))

    def _commit_spec(self) -> str | None:
        """Apply the input shape and dtype; a bad shape is refused with the reason."""
        if self.node_id is not None:
            return None
        graph = self.controller.graph
        shape_row = self.rows["input_shape"]
        try:
            shape = fmt.parse_shape(shape_row.editor.text())
        except ValueError as exc:
            shape_row.show_error(str(exc))
            return str(exc)
        spec = InputSpec(shape, self.rows["dtype"].editor.currentText())
        reason = None if spec == graph.input_spec else self.controller.set_spec(spec, graph.num_classes)
        shape_row.show_error(reason)
        return reason

    def _commit_classes(self, classes: int) -> str | None:
        graph = self.controller.graph
        if self.node_id is not None or classes == graph.num_classes:
            return None
        reason = self.controller.set_spec(graph.input_spec, classes)
        self.rows["num_classes"].show_error(reason)
        return reason

    def _shape_text(self, node_id: str) -> str:
        shape = self._shapes.get(node_id)
        return fmt.shape(shape) if shape else "—"

    def _port_rows(self, node_id: str) -> list[tuple[str, str]]:
        """(port number, shape text) for each output of a node with several; [] for the others."""
        graph = self.controller.graph
        node = graph.nodes.get(node_id)
        if node is None or node.spec is None or not node.spec.multi_output:
            return []
        names = node.spec.outputs_for(node.params)
        shapes = self._ports.get(node_id, [])
        return [(str(i), fmt.shape(shapes[i]) if i < len(shapes) else "—") for i in range(len(names))]


def _is_undo_or_redo(event: QKeyEvent) -> bool:
    return (event.matches(QKeySequence.StandardKey.Undo) or event.matches(QKeySequence.StandardKey.Redo)
            or QKeySequence(event.keyCombination()) == QKeySequence("Ctrl+Y"))


def _parsed(text: str) -> tuple[int, ...] | None:
    try:
        return fmt.parse_shape(text)
    except ValueError:
        return None


def _shape_text(shape: tuple[int, ...]) -> str:
    return ", ".join(str(d) for d in shape)


def _header(node: Node) -> str:
    display = node.spec.display if node.spec else node.type
    return f"{node.title}  ·  {display}" if node.label else f"{node.id}  ·  {display}"


if __name__ == "__main__":
    from PySide6.QtGui import QUndoStack

    from graph_editor.model import load_graph
    from studio.preview import preview
    from studio.resources import TEMPLATES

    def _make() -> InspectorDock:
        controller = EditorController(load_graph(TEMPLATES / "lenet5.graph.json"), QUndoStack())
        dock = InspectorDock(controller)
        dock._controller_keepalive = controller  # type: ignore[attr-defined]
        controller.select(["conv1"])
        return dock

    raise SystemExit(preview(_make, "Inspector", (340, 560)))
