"""The status bar's permanent part: valid or not (with the problem count) and the totals."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QLabel, QStatusBar

from graph_editor.model import Inference, units


class GraphStatus(QObject):
    """Two labels in a status bar, following live validation and analysis (a child of the bar,
    so its connections end with the window)."""

    def __init__(self, bar: QStatusBar) -> None:
        super().__init__(bar)
        self.validity = QLabel("Checking…")
        self.totals = QLabel("")
        bar.addPermanentWidget(self.totals)
        bar.addPermanentWidget(self.validity)

    def show_blank(self) -> None:
        """A new network (only Input and Output, not yet wired): nothing is wrong yet, nothing red."""
        self.validity.setText("new network: add layers between Input and Output")
        self._set_state("statusNeutral")
        self.totals.setText("")

    def show_checking(self) -> None:
        """An edit of a big graph is being checked off the GUI thread: the verdict shown was of the graph before."""
        self.validity.setText("Checking…")
        self._set_state("statusChecking")

    def _set_state(self, name: str) -> None:
        self.validity.setObjectName(name)
        self.validity.style().unpolish(self.validity)
        self.validity.style().polish(self.validity)

    def show_inference(self, inference: Inference) -> None:
        errors = sum(p.severity == "error" for p in inference.problems)
        warnings = len(inference.problems) - errors
        if errors:
            text = f"✖ invalid: {errors} problem{'s' * (errors != 1)}"
        else:
            text = "✔ valid" + (f" ({warnings} warning{'s' * (warnings != 1)})" if warnings else "")
        self.validity.setText(text)
        self._set_state("statusInvalid" if errors else "statusValid")
        if errors:
            self.totals.setText("")

    def show_analysis(self, analysis: Any, problems: Sequence[Any] = ()) -> None:
        if self.validity.objectName() == "statusNeutral":
            return
        if analysis is None:
            self.totals.setText("")
            return
        self.totals.setText(f"{analysis.total_params:,} params · {units.count(analysis.total_flops)} FLOPs · "
                            f"{units.nbytes(analysis.activation_bytes)} activations")


def is_blank(graph: Any) -> bool:
    """Only an Input and an Output, not wired (see :meth:`Graph.is_blank`)."""
    return bool(graph.is_blank())
