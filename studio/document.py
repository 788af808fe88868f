"""The open document: which file the edited graph belongs to and whether it has unsaved changes.

"Unsaved" is the undo stack's clean state, so undoing back to the saved state clears the
marker; steps that only change how the network is shown (a block opened or closed) leave it saved. Opening reads the whole file first: a file that cannot be read raises
:class:`GraphFileError` and the graph being edited is left as it was.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QUndoStack

from graph_editor.model import Graph, save_graph
from graph_editor.ui.controller import EditorController

UNTITLED = "Untitled"


class Document(QObject):
    """Path, name and dirty state of the graph an :class:`EditorController` edits."""

    changed = Signal()  # the path, the name or the dirty state changed
    saved = Signal(str)  # path

    def __init__(self, controller: EditorController, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.controller = controller
        self.path: Path | None = None
        self._name = UNTITLED
        self._origin: Path | None = None   # the template an unsaved graph was made from
        self.undo_stack.cleanChanged.connect(lambda _clean: self.changed.emit())
        self.undo_stack.indexChanged.connect(lambda _index: self.changed.emit())

    @property
    def undo_stack(self) -> QUndoStack:
        return self.controller.undo_stack

    @property
    def graph(self) -> Graph:
        return self.controller.graph

    @property
    def dirty(self) -> bool:
        """Whether an edit of the network lies between the saved state and now."""
        stack = self.undo_stack
        if stack.isClean():
            return False
        clean, now = stack.cleanIndex(), stack.index()
        if clean < 0:
            return True
        steps = [stack.command(i) for i in range(min(clean, now), max(clean, now))]
        return not all(getattr(getattr(s, "command", None), "view_only", False) for s in steps)

    @property
    def name(self) -> str:
        """What the title bar shows: the file name, or the template's name for an unsaved graph."""
        return self.path.name if self.path else self._name

    @property
    def origin(self) -> Path | None:
        """The file the graph is, or was made from (a template): what its runs are named after."""
        return self.path or self._origin

    def replace(self, graph: Graph, path: Path | None = None, name: str = UNTITLED, dirty: bool = False,
                origin: Path | None = None) -> None:
        """Edit ``graph`` from now on (new, template, open, recovery); the undo history restarts.
        ``origin``: the template an unsaved graph was made from."""
        self.controller.set_graph(graph)
        self.path = Path(path) if path else None
        self._origin = Path(origin) if origin else None
        self._name = name
        self.undo_stack.setClean()
        if dirty:
            self.undo_stack.resetClean()
        self.changed.emit()

    def save(self, path: str | Path | None = None) -> Path:
        """Write the graph atomically to ``path`` (or the current path); raises OSError."""
        target = Path(path).resolve() if path else self.path
        if target is None:
            raise ValueError("the graph has no file yet: choose where to save it")
        save_graph(self.graph, target)
        self.path = target
        self.undo_stack.setClean()
        self.changed.emit()
        self.saved.emit(str(target))
        return target


def starter_graph() -> Graph:
    """What File > New edits: an Input and an Output, ready to be wired."""
    graph = Graph()
    graph.add_node("Input", "input", position=(0.0, 0.0))
    graph.add_node("Output", "output", position=(360.0, 0.0))
    return graph
