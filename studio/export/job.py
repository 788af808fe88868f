"""One export off the GUI thread: builds the model source and exports it, saying how far it got."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal, Slot


class ExportJob(QObject):
    """Builds the source and exports it; lives in a worker thread."""

    progress = Signal(str)
    finished = Signal(object)   # the ExportReport
    failed = Signal(str, str)   # message, node id ("" when no node is at fault)

    def __init__(self, make_source: Callable[[], Any], fmt: str, output: str | Path, options: Any = None) -> None:
        super().__init__()
        self.make_source, self.fmt, self.output, self.options = make_source, fmt, output, options

    @Slot()
    def run(self) -> None:
        from exporters import ExportError, export

        try:
            self.progress.emit("preparing the model")
            source = self.make_source()
            report = export(source, self.fmt, self.output, self.options, progress=self.progress.emit)
        except ExportError as exc:
            self.failed.emit(str(exc), exc.node or "")
        except Exception as exc:  # shown in the dialog, never a traceback on the user's screen
            self.failed.emit(f"{type(exc).__name__}: {exc}", "")
        else:
            self.finished.emit(report)
