"""Live checking: validate the graph shortly after every edit, then analyse it.

Edits arrive in bursts (a drag, a typed number), so :class:`LiveAnalysis` waits for a
short quiet period (a single-shot timer restarted by every change) before it runs the
pure-Python ``validate`` and emits ``inferred``. The torch-based ``analyze`` (parameters,
FLOPs, activation bytes), with the build on ``meta`` that ``torch-studio validate`` makes
(:func:`~graph_editor.analysis.check.check_graph`: one verdict), runs next, from the event loop, so the
shapes are painted first; torch itself is imported on the first analysis, after the window has shown.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, QTimer, Signal

from ..model import Graph, Inference, Problem, validate

if TYPE_CHECKING:
    from ..analysis import Analysis
    from .controller import EditorController

DEBOUNCE_MS = 40  # long enough to merge a burst of keystrokes, short enough to feel live


class LiveAnalysis(QObject):
    """Follows a graph (or the graph an :class:`EditorController` edits) and re-checks it.

    Signals: ``inferred(Inference)`` after validation, ``analyzed(Analysis | None, problems)``
    after analysis (None when the graph does not validate or cannot be built).
    """

    inferred = Signal(object)
    analyzed = Signal(object, object)

    def __init__(self, source: Graph | EditorController, parent: QObject | None = None,
                 delay_ms: int = DEBOUNCE_MS, batch: int = 1, analyze: bool = True) -> None:
        super().__init__(parent)
        self.batch = batch
        self.analyze_enabled = analyze
        self.inference: Inference | None = None
        self.analysis: Analysis | None = None
        self._graph: Graph | None = None
        self._current = False   # self.inference is of the graph as it is now (no change since)
        self._timer = QTimer(self, singleShot=True, interval=delay_ms)
        self._timer.timeout.connect(self.refresh)
        self._analysis_timer = QTimer(self, singleShot=True, interval=0)
        self._analysis_timer.timeout.connect(self._analyze)
        if isinstance(source, Graph):
            self.set_graph(source)
        else:
            source.graph_replaced.connect(self.set_graph)
            self.set_graph(source.graph)

    @property
    def graph(self) -> Graph | None:
        return self._graph

    def set_graph(self, graph: Graph) -> None:
        """Follow ``graph`` instead of the current one, and check it soon."""
        if self._graph is not None:
            self._graph.events.changed.disconnect(self.schedule)
        self._graph = graph
        graph.events.changed.connect(self.schedule)
        self.schedule()

    def schedule(self) -> None:
        """Check after the quiet period (each call restarts it)."""
        self._current = False
        self._timer.start()

    def refresh(self) -> Inference:
        """Validate now and emit ``inferred``; the analysis follows from the event loop."""
        self._timer.stop()
        assert self._graph is not None
        self.inference = validate(self._graph, self.batch)
        self._current = True
        self.inferred.emit(self.inference)
        if self.analyze_enabled:
            self._analysis_timer.start()
        return self.inference

    def analyze_now(self) -> Analysis | None:
        """Run the analysis at once (tests, the summary dock's refresh button)."""
        self._analysis_timer.stop()
        return self._analyze()

    def _analyze(self) -> Analysis | None:
        if self._graph is None:
            return None
        # The graph validated once per change: the analysis reuses the inference unless an edit came since.
        inf = self.inference if self.inference is not None and self._current else validate(self._graph, self.batch)
        problems = list(inf.problems)
        self.analysis = None
        if inf.ok:
            # the verdict `torch-studio validate` prints: the build on meta and its size warning included
            from ..analysis.check import check_graph  # torch: imported on first use, after the window shows

            try:
                check = check_graph(self._graph, self.batch, inf)
                self.analysis, problems = check.analysis, check.problems
            except Exception as exc:  # a layer torch refuses: shown as a graph problem, never a traceback
                problems.append(Problem(None, f"analysis failed: {exc}"))
        self.analyzed.emit(self.analysis, problems)
        return self.analysis
