"""Every question the studio asks the user, behind one object.

The main window never opens a modal dialog itself: it asks its :class:`Prompts`. The
application passes :class:`QtPrompts` (real message boxes and file dialogs); tests pass
an object with the same methods that answers from a script, so nothing blocks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from PySide6.QtWidgets import QAbstractButton, QFileDialog, QInputDialog, QMessageBox, QWidget

FILE_FILTER = "Torch Studio graphs (*.graph.json);;All files (*)"


@dataclass(frozen=True)
class ImportRequest:
    """What the import dialog returns: ``module:factory``, the per-sample input shape (empty:
    guess it from the first layer), the class count (0: the size of the module's output) and
    ``strict`` (refuse unmapped ops instead of keeping their modules as Module nodes)."""

    target: str
    input_shape: tuple[int, ...]
    num_classes: int
    strict: bool = False
    weights: str = ""        # "": as the factory makes them; "cache": the local caches; else a weights file


class Prompts(Protocol):
    """The studio's questions; each returns the user's answer (None: cancelled)."""

    def save_changes(self, parent: QWidget, document: str) -> str:
        """'save', 'discard' or 'cancel' for unsaved changes in ``document``."""

    def open_path(self, parent: QWidget, directory: str) -> str | None: ...

    def save_path(self, parent: QWidget, suggested: str) -> str | None: ...

    def error(self, parent: QWidget, title: str, message: str) -> None: ...

    def recover(self, parent: QWidget, description: str) -> bool:
        """True to restore the autosaved graph described by ``description``."""

    def template(self, parent: QWidget) -> Path | None:
        """A template file chosen in the gallery."""

    def import_module(self, parent: QWidget) -> ImportRequest | None: ...

    def block_name(self, parent: QWidget, suggested: str) -> str | None:
        """A name for the selection saved as a block."""

    def running_run(self, parent: QWidget) -> str:
        """The window closes while a run is going: 'stop', 'background' (let it finish) or 'cancel'."""

    def delete_runs(self, parent: QWidget, description: str) -> bool:
        """True to delete the runs named in ``description`` (e.g. "2 runs: 3 "alpha", 5") with their
        rows and files."""

    def number(self, parent: QWidget, title: str, label: str, value: float, low: float, high: float,
               decimals: int) -> float | None:
        """A number from ``low`` to ``high`` (``decimals`` 0: a whole number), ``value`` offered."""


class QtPrompts:
    """Prompts answered through real dialogs."""

    def __init__(self, template_dialog: Callable[[QWidget], Path | None],
                 import_dialog: Callable[[QWidget], ImportRequest | None]) -> None:
        self._template_dialog = template_dialog
        self._import_dialog = import_dialog

    def save_changes(self, parent: QWidget, document: str) -> str:
        buttons = (QMessageBox.StandardButton.Save | QMessageBox.StandardButton.Discard
                   | QMessageBox.StandardButton.Cancel)
        answer = QMessageBox.question(parent, "Unsaved changes",
                                      f"{document} has unsaved changes. Save them first?", buttons,
                                      QMessageBox.StandardButton.Save)
        return {QMessageBox.StandardButton.Save: "save",
                QMessageBox.StandardButton.Discard: "discard"}.get(answer, "cancel")

    def open_path(self, parent: QWidget, directory: str) -> str | None:
        path, _ = QFileDialog.getOpenFileName(parent, "Open graph", directory, FILE_FILTER)
        return path or None

    def save_path(self, parent: QWidget, suggested: str) -> str | None:
        path, _ = QFileDialog.getSaveFileName(parent, "Save graph", suggested, FILE_FILTER)
        if path and not path.endswith(".graph.json"):
            path += ".graph.json"
        return path or None

    def error(self, parent: QWidget, title: str, message: str) -> None:
        QMessageBox.critical(parent, title, message)

    def recover(self, parent: QWidget, description: str) -> bool:
        answer = QMessageBox.question(
            parent, "Recover unsaved work",
            f"Torch Studio did not close properly last time.\n\n{description}\n\nRestore the autosaved graph?",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No, QMessageBox.StandardButton.Yes)
        return answer == QMessageBox.StandardButton.Yes

    def template(self, parent: QWidget) -> Path | None:
        return self._template_dialog(parent)

    def import_module(self, parent: QWidget) -> ImportRequest | None:
        return self._import_dialog(parent)

    def block_name(self, parent: QWidget, suggested: str) -> str | None:
        name, ok = QInputDialog.getText(parent, "Save as block", "Name of the block in the palette:",
                                        text=suggested)
        return name.strip() if ok and name.strip() else None

    def running_run(self, parent: QWidget) -> str:
        return ask_about_running_run(parent)

    def delete_runs(self, parent: QWidget, description: str) -> bool:
        return ask_delete_runs(parent, description)

    def number(self, parent: QWidget, title: str, label: str, value: float, low: float, high: float,
               decimals: int) -> float | None:
        if decimals == 0:
            n, ok = QInputDialog.getInt(parent, title, label, int(value), int(low), int(high))
            return float(n) if ok else None
        x, ok = QInputDialog.getDouble(parent, title, label, value, low, high, decimals)
        return x if ok else None


def ask_about_running_run(parent: QWidget | None) -> str:
    """'stop', 'background' or 'cancel', asked in a message box."""
    box = QMessageBox(QMessageBox.Icon.Question, "A run is going",
                      "A training run is still going. Stop it, or let it finish in the background? "
                      "A run left going keeps writing to the run store; the Runs dock shows it next time.",
                      QMessageBox.StandardButton.Cancel, parent)
    stop = box.addButton("Stop the run", QMessageBox.ButtonRole.DestructiveRole)
    keep = box.addButton("Let it finish", QMessageBox.ButtonRole.AcceptRole)
    box.setDefaultButton(keep)
    box.exec()
    answers: dict[QAbstractButton, str] = {stop: "stop", keep: "background"}
    return answers.get(box.clickedButton(), "cancel")


def ask_delete_runs(parent: QWidget | None, description: str) -> bool:
    """Ask in a message box (No by default) whether to delete the runs ``description`` names."""
    box = QMessageBox(QMessageBox.Icon.Warning, "Delete runs",
                      f"Delete {description}?\n\nTheir metrics, epoch reports, checkpoint and export records "
                      "leave the run store, and their run folders (checkpoints, logs and anything exported "
                      "into them) are removed from disk. Exports saved elsewhere are kept. This cannot be "
                      "undone.", QMessageBox.StandardButton.Cancel, parent)
    delete = box.addButton("Delete", QMessageBox.ButtonRole.DestructiveRole)
    box.setDefaultButton(QMessageBox.StandardButton.Cancel)
    box.exec()
    return box.clickedButton() is delete
