"""The samples of the confusion-matrix cell asked for last, for the Train dashboard and the Runs tab.

A click on a cell re-evaluates the checkpoint of the matrix shown, on the CPU, off the GUI thread
(:func:`~.tasks.predict_checkpoint`); one runs at a time. A click while one runs is not dropped: the
newest click is the one answered. A result asked about another matrix than the newest ask's is never
shown: the newest ask runs instead. An owner that replaces its matrix forgets the asks (the Runs tab:
another run selected): the gallery says to click again. One whose matrix moves on by itself (the Train
dashboard: an epoch's matrix every epoch) says which matrix it shows (``shown``): an answer about an
older one goes to the gallery, titled with its checkpoint, and the newer matrix stays.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QObject

from .confusion import ConfusionPanel
from .tasks import BackgroundTask, predict_checkpoint


@dataclass(frozen=True)
class Ask:
    """One click's question: the samples of cell (t, p) of the matrix ``source`` names (the run and the
    checkpoint of its epoch), from ``spec`` and the checkpoint file ``path``; ``label`` says whose they are."""

    source: Hashable
    spec: dict[str, Any]
    path: str
    label: str
    t: int
    p: int


class CellSamples(QObject):
    """Answers :class:`Ask` s into ``panel``: the newest one, for the matrix it was asked about."""

    def __init__(self, panel: ConfusionPanel, parent: QObject | None = None,
                 shown: Callable[[Hashable], bool] = lambda source: True) -> None:
        """``shown(source)``: whether the matrix an ask's ``source`` names is the one the panel shows."""
        super().__init__(parent)
        self.panel = panel
        self.shown = shown
        self.task: BackgroundTask | None = None
        self._asked: Ask | None = None         # the newest click not yet answered

    def ask(self, ask: Ask) -> None:
        """Answer ``ask``, now or when the running re-evaluation ends (its result then goes to the newest ask)."""
        self._asked = ask
        if self.task is None or not self.task.is_running():
            self._start(ask)

    def forget(self) -> None:
        """The matrix shown changed: no result of an older one may be shown, and a click still waiting
        is not answered (the gallery asks for a new click instead of "Loading..." for good)."""
        if self._asked is not None:
            self._asked = None
            self.panel.show_message("Click a cell of the matrix to see its samples.")

    def _start(self, ask: Ask) -> None:
        task = self.task = BackgroundTask(lambda: predict_checkpoint(ask.spec, ask.path), self)
        task.done.connect(lambda result: self._done(ask, result))
        task.error.connect(lambda message: self._failed(ask, message))
        task.start()

    def _done(self, ask: Ask, result: Any) -> None:
        newest = self._asked
        if newest is None:
            return                                     # the matrix changed and nothing was asked since
        if newest.source != ask.source:
            self._start(newest)                        # asked about another matrix meanwhile: answer that
            return
        self._asked = None
        self.panel.show_predictions(result, ask.label, newest.t, newest.p,   # the newest click's cell
                                    matrix=self.shown(ask.source))

    def _failed(self, ask: Ask, message: str) -> None:
        newest = self._asked
        if newest is not None and newest.source != ask.source:
            self._start(newest)
        elif newest is not None:
            self._asked = None
            self.panel.show_message(message)

    def wait(self, ms: int = 60_000) -> bool:
        """Wait for the running re-evaluation (tests, shutdown)."""
        return self.task.wait(ms) if self.task is not None else True
