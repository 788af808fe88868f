"""The model's Qt-free commands adapted to ``QUndoStack``."""

from __future__ import annotations

from PySide6.QtGui import QUndoCommand

from ..model import Command


class ModelCommand(QUndoCommand):
    """Wraps a :class:`graph_editor.model.commands.Command` so a ``QUndoStack`` can hold it.

    ``applied=True`` says the command has already been applied (a compound edit that was
    checked step by step on the live graph): the stack's first ``redo`` then does nothing.
    """

    def __init__(self, command: Command, applied: bool = False) -> None:
        super().__init__(command.text)
        self.command = command
        self._skip_redo = applied

    def redo(self) -> None:
        if self._skip_redo:
            self._skip_redo = False
            return
        self.command.redo()

    def undo(self) -> None:
        self.command.undo()
