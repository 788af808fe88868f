"""Live checking: validate the graph shortly after every edit, then analyse it off the GUI thread.

Edits arrive in bursts (a drag, a typed number), so :class:`LiveAnalysis` waits for a
short quiet period (a single-shot timer restarted by every change) before it runs the
pure-Python ``validate`` and emits ``inferred``. The torch-based ``analyze`` (parameters,
FLOPs, activation bytes), with the build on ``meta`` that ``torch-studio validate`` makes
(:func:`~graph_editor.analysis.check.check_graph`: one verdict), runs next on a background thread, on a
snapshot of the graph (it took 0.1 s per edit on ResNet-50 and ~11 s on a 20,000-node graph, all of it
a frozen window when it ran on the GUI thread). Only the newest edit's analysis is shown: an edit drops
a pending one, and a result that comes back after a newer edit is dropped. torch itself is imported
by the first analysis, on that thread.

A big graph (:attr:`LiveAnalysis.BACKGROUND_FROM` nodes) is validated on that thread too, on the snapshot
the analysis then reads: ``validate`` took ~0.25 s of the GUI thread per edit of a 20,000-layer chain. Until
its verdict comes, ``checking`` says that the one shown is of the graph as it was (the status bar says
"Checking…"); a verdict is applied only if no edit came since (a newer edit drops it, as it drops an
analysis), so a stale one is never shown as the graph's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, QTimer, Signal

from ..model import Graph, Inference, Problem, validate
from .background import NewestOnly, collection_paused

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
    checking = Signal()   # the verdict shown is no longer the graph's; the new one is being made off the GUI thread

    BACKGROUND_FROM = 2000   # nodes: from this size the debounced validation runs off the GUI thread

    def __init__(self, source: Graph | EditorController, parent: QObject | None = None,
                 delay_ms: int = DEBOUNCE_MS, batch: int = 1, analyze: bool = True) -> None:
        super().__init__(parent)
        self.batch = batch
        self.analyze_enabled = analyze
        self.inference: Inference | None = None
        self.analysis: Analysis | None = None
        self._graph: Graph | None = None
        self._current = False   # self.inference is of the graph as it is now (no change since)
        self._announced = False   # ``checking`` was emitted since the last verdict
        self._timer = QTimer(self, singleShot=True, interval=delay_ms)
        self._timer.timeout.connect(self._check)
        self._analysis_timer = QTimer(self, singleShot=True, interval=0)
        self._analysis_timer.timeout.connect(self._analyze_in_background)
        self.jobs = NewestOnly("live-analysis", self, self._on_checked)
        if isinstance(source, Graph):
            self.set_graph(source)
        else:
            source.graph_replaced.connect(self.set_graph)
            self.set_graph(source.graph)

    @property
    def graph(self) -> Graph | None:
        return self._graph

    @property
    def up_to_date(self) -> bool:
        """Whether the shown verdict (``inference``) is of the graph as it is now: False from an edit of
        the followed graph until its check has run."""
        return self.inference is not None and self._current

    def set_graph(self, graph: Graph) -> None:
        """Follow ``graph`` instead of the current one, and check it soon."""
        if self._graph is not None:
            self._graph.events.changed.disconnect(self.schedule)
        self._graph = graph
        graph.events.changed.connect(self.schedule)
        self.schedule()

    def schedule(self) -> None:
        """Check after the quiet period (each call restarts it). An analysis of the graph as it was is
        no longer wanted: one waiting is dropped, one running is dropped when it comes back."""
        self._current = False
        self._analysis_timer.stop()
        self.jobs.cancel()
        self._timer.start()
        if not self._announced and self._in_background():   # once until the verdict comes (an opened file too)
            self._announced = True
            self.checking.emit()

    def _in_background(self) -> bool:
        return self._graph is not None and len(self._graph.nodes) >= self.BACKGROUND_FROM

    def _check(self) -> None:
        """The quiet period is over: validate, here or (a big graph) off the GUI thread."""
        if not self._in_background():
            self.refresh()
            return
        assert self._graph is not None
        graph, batch = self._graph.snapshot(), self.batch
        self.jobs.submit(lambda: (graph, validate(graph, batch)))

    def refresh(self) -> Inference:
        """Validate now and emit ``inferred``; the analysis follows from the event loop."""
        self._timer.stop()
        self.jobs.cancel()   # a validation under way is of this same graph: this one is shown instead
        assert self._graph is not None
        with collection_paused():   # the inference and what its views make: thousands of objects, no cycles
            self.inference = validate(self._graph, self.batch)
            self._current, self._announced = True, False
            self.inferred.emit(self.inference)
        if self.analyze_enabled:
            self._analysis_timer.start()
        return self.inference

    def analyze_now(self) -> Analysis | None:
        """Run the analysis at once, on this thread (tests, the summary dock's refresh button); an
        analysis running in the background is dropped."""
        self._analysis_timer.stop()
        self.jobs.cancel()
        if self._graph is None:
            return None
        self._show(*check(self._graph, self.batch, self._inference_now()))
        return self.analysis

    def _inference_now(self) -> Inference:
        """The graph validated once per change: the analysis reuses the inference unless an edit came since."""
        assert self._graph is not None
        current = self.up_to_date
        return self.inference if current and self.inference is not None else validate(self._graph, self.batch)

    def _analyze_in_background(self) -> None:
        if self._graph is None:
            return
        inf = self._inference_now()
        if not inf.ok:   # nothing to build: said at once
            self._show(None, list(inf.problems))
            return
        graph, batch = self._graph.snapshot(), self.batch
        self.jobs.submit(lambda: check(graph, batch, inf))

    def _on_checked(self, result: object) -> None:
        """A result of the newest request (an edit since would have dropped it): a big graph's verdict (then
        its analysis, on the same snapshot), or an analysis."""
        if isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], Inference):
            graph, inference = result
            with collection_paused():
                self.inference = inference
                self._current, self._announced = True, False
                self.inferred.emit(inference)
            if self.analyze_enabled and inference.ok:
                batch = self.batch
                self.jobs.submit(lambda: check(graph, batch, inference))
            elif self.analyze_enabled:
                self._show(None, list(inference.problems))
            return
        if isinstance(result, BaseException):  # check() reports what it expects; this is anything else
            problems = list(self.inference.problems) if self.inference is not None else []
            self._show(None, [*problems, Problem(None, f"analysis failed: {result}")])
        else:
            self._show(*result)  # type: ignore[misc]  # check()'s (analysis, problems)

    def _show(self, analysis: Analysis | None, problems: list[Problem]) -> None:
        self.analysis = analysis
        self.analyzed.emit(analysis, problems)


def check(graph: Graph, batch: int, inf: Inference) -> tuple[Analysis | None, list[Problem]]:
    """The analysis and every problem of ``graph`` (validated as ``inf``): a plain function, run on the
    background thread (it reads only ``graph``, a snapshot, and ``inf``, which nothing changes)."""
    problems = list(inf.problems)
    if not inf.ok:
        return None, problems
    # the verdict `torch-studio validate` prints: the build on meta and its size warning included
    from ..analysis.check import check_graph  # torch: imported on first use, after the window shows

    try:
        result = check_graph(graph, batch, inf)
    except Exception as exc:  # a layer torch refuses: shown as a graph problem, never a traceback
        return None, [*problems, Problem(None, f"analysis failed: {exc}")]
    return result.analysis, result.problems
