"""Experiments > New Sweep: a study over the recipe and the design's sweep variables, started from the
studio as the ``torch-studio sweep`` command a user would type (so it runs, stops and resumes as that
command does, and the workspace follows it from the run store).

The dialog's search space starts with the learning rate and every parameter marked as a sweep variable
in the Inspector (:func:`graph_editor.model.sweep_vars.space_tokens`); it is checked as the command
checks it (:func:`trainer.sweep.space.parse_space`) while it is typed, and nothing starts while it is
wrong. :class:`SweepProcess` runs the command (the graph as a file beside it) and stops it with SIGTERM,
which stops its trials cleanly.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QObject, QProcess, QTimer, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from graph_editor.model import Graph
from graph_editor.model.serialize import save_graph
from graph_editor.model.sweep_vars import space_tokens

RECIPE_SPACE = "lr=1e-4..3e-2:log"
PRUNERS = ("median", "halving", "hyperband", "none")


@dataclass
class SweepRequest:
    """What the dialog asks for: the arguments of ``torch-studio sweep`` but the graph."""

    data: str
    trials: int
    parallel: int
    epochs: int
    space: str
    prune: str
    budget: str
    study: str

    def arguments(self, graph_file: str, db_url: str) -> list[str]:
        args = ["sweep", graph_file, "--data", self.data, "--trials", str(self.trials), "--parallel",
                str(self.parallel), "--epochs", str(self.epochs), "--space", self.space, "--prune", self.prune,
                "--study", self.study, "--db", db_url]
        return args + (["--budget", self.budget] if self.budget else [])


def default_space(graph: Graph) -> str:
    return ",".join([RECIPE_SPACE, *space_tokens(graph)])


class SweepDialog(QDialog):
    """The sweep's settings, the space checked as it is typed; ``request()`` once accepted."""

    def __init__(self, graph: Graph, parent: QWidget | None = None, *, dataset: str = "digits") -> None:
        super().__init__(parent)
        self.setWindowTitle("New Sweep")
        self.graph = graph
        name = re.sub(r"[^A-Za-z0-9_-]+", "_", str(graph.metadata.get("name") or "graph")).strip("_") or "graph"
        self.data = QLineEdit(dataset)     # the last run's, as the Train dialog starts from
        self.trials, self.parallel, self.epochs = _spin(8, 1, 10_000), _spin(2, 1, 64), _spin(3, 1, 10_000)
        self.space = QLineEdit(default_space(graph))
        self.space.setMinimumWidth(520)
        self.prune = QComboBox()
        self.prune.addItems(PRUNERS)
        self.budget = QLineEdit()
        self.budget.setPlaceholderText("e.g. 512MiB: a trial predicted to need more is pruned before it starts")
        self.study = QLineEdit(f"{name}-sweep-{time.strftime('%m%d-%H%M%S')}")
        swept = space_tokens(graph)
        self.from_design = QLabel("From the design (Inspector > Sweep): " + (", ".join(swept) if swept else
                                  "none marked yet; select a layer and type a range in its Sweep lines"))
        self.from_design.setWordWrap(True)
        self.problem = QLabel("")
        self.problem.setObjectName("fieldError")
        self.problem.setWordWrap(True)
        form = QFormLayout()
        for label, w in (("dataset", self.data), ("trials", self.trials), ("at a time", self.parallel),
                         ("epochs", self.epochs), ("space", self.space), ("pruning", self.prune),
                         ("memory budget", self.budget), ("study", self.study)):
            form.addRow(label, w)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.start = self.buttons.addButton("Start sweep", QDialogButtonBox.ButtonRole.AcceptRole)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addLayout(form)
        lay.addWidget(self.from_design)
        lay.addWidget(self.problem)
        lay.addWidget(self.buttons)
        self._timer = QTimer(self, singleShot=True, interval=250)
        self._timer.timeout.connect(self.check)
        for edit in (self.space, self.budget, self.study, self.data):
            edit.textChanged.connect(self._timer.start)
        self.check()

    def check(self) -> str | None:
        """The first problem of the settings (shown, and Start disabled), or None."""
        from studio.cli_memory import parse_bytes
        from trainer.sweep.space import SpaceError, parse_space

        problem = None
        try:
            parse_space(self.space.text(), graph=self.graph)
            if self.budget.text().strip():
                parse_bytes(self.budget.text())
            if not self.study.text().strip():
                problem = "study: give the study a name"
            elif not self.data.text().strip():
                problem = "dataset: give 'digits' or a dataset file or folder"
        except SpaceError as exc:
            problem = str(exc)
        except argparse.ArgumentTypeError as exc:
            problem = f"memory budget: {exc}"
        self.problem.setText(problem or "")
        self.start.setEnabled(problem is None)
        return problem

    def accept(self) -> None:
        if self.check() is None:
            super().accept()

    def request(self) -> SweepRequest:
        return SweepRequest(self.data.text().strip(), self.trials.value(), self.parallel.value(), self.epochs.value(),
                            self.space.text().strip(), self.prune.currentText(), self.budget.text().strip(),
                            self.study.text().strip())


def _spin(value: int, low: int, high: int) -> QSpinBox:
    box = QSpinBox()
    box.setRange(low, high)
    box.setValue(value)
    return box


class SweepProcess(QObject):
    """One ``torch-studio sweep`` child process: its stderr lines as ``line``, ``finished(exit code)``."""

    line = Signal(str)
    finished = Signal(int)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.process: QProcess | None = None
        self.folder = Path(tempfile.mkdtemp(prefix="torch-studio-sweep-"))

    def start(self, graph: Graph, request: SweepRequest, db_url: str) -> None:
        graph_file = self.folder / f"{request.study}.graph.json"
        save_graph(graph, graph_file)        # the graph as it is now, its sweep variables with it
        p = self.process = QProcess(self)
        p.setProcessChannelMode(QProcess.ProcessChannelMode.SeparateChannels)
        p.readyReadStandardError.connect(self._read)
        p.finished.connect(lambda code, _status: self.finished.emit(int(code)))
        p.start(sys.executable, ["-m", "studio", *request.arguments(str(graph_file), db_url)])

    def running(self) -> bool:
        return self.process is not None and self.process.state() != QProcess.ProcessState.NotRunning

    def stop(self, wait_ms: int = 60_000) -> None:
        """SIGTERM: the sweep stops its trials (their workers end cleanly) and exits; killed if it hangs."""
        if not self.running():
            return
        assert self.process is not None
        self.process.terminate()
        if not self.process.waitForFinished(wait_ms):
            self.process.kill()
            self.process.waitForFinished(5000)

    def _read(self) -> None:
        assert self.process is not None
        text = bytes(self.process.readAllStandardError().data()).decode(errors="replace")
        for line in text.splitlines():
            if line.strip():
                self.line.emit(line)
