"""The Experiments workspace's hook: the sweeps (Optuna studies) in the run store, live while they run.

:class:`ExperimentsHook` registers the workspace through the window's port; its view
(:mod:`.panel`, pyqtgraph, Optuna) is built on the first switch to it. While the workspace shows, a
timer re-reads the chosen study every :data:`REFRESH_MS` (a study with running trials, or a new
study, redraws; a finished one is left alone). The best trial (or the selected one) opens its run's
graph as a new document, exports its run (the Export dialog) or is retrained on train+val: its run's
spec with the validation split given to training, started as an ordinary run in the Train workspace.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, QTimer
from PySide6.QtWidgets import QDockWidget

from ..actions import ActionSpec
from .new_sweep import SweepDialog, SweepProcess, SweepRequest

if TYPE_CHECKING:
    from ..port import StudioPort
    from .panel import ExperimentsPanel

REFRESH_MS = 2000


def retrain_spec(spec: dict[str, Any], name: str, tags: Sequence[str] = ()) -> dict[str, Any]:
    """A run's spec to train again on train+val: no validation split (the test split stays apart), so
    no best checkpoint and no early stopping, which need one; the same epochs and recipe. ``tags``, the
    trial run's (``study:NAME``, ``trial:N``), give the new run's: ``study:NAME``, ``retrain`` and
    ``retrain-of-trial:N`` (not ``trial:N``: a filter for the trial's runs finds the trial alone)."""
    kept = [t for t in tags if t.startswith("study:")]
    kept += ["retrain", *(f"retrain-of-{t}" for t in tags if t.startswith("trial:"))]
    return {**spec, "name": f"{name} (train+val)", "data": {**spec.get("data", {}), "val_fraction": 0.0},
            "checkpoints": {**spec.get("checkpoints", {}), "best": False},
            "early_stopping": {**spec.get("early_stopping", {}), "patience": 0}, "tags": kept}


class ExperimentsHook(QObject):
    """The Experiments workspace of one window."""

    def __init__(self, port: StudioPort, db_url: str | None = None, *, training: Callable[[], Any] | None = None,
                 export_run: Callable[[int], Any] | None = None,
                 dataset: Callable[[], str | None] | None = None) -> None:
        super().__init__(port.owner)
        self._dataset = dataset
        self.port, self.db_url = port, db_url
        self._training, self._export_run = training, export_run
        self.panel: ExperimentsPanel | None = None
        self.storage: Any = None
        self.study: str = ""
        self._last: tuple[Any, ...] = ()
        self.timer = QTimer(self, interval=REFRESH_MS)
        self.timer.timeout.connect(self.refresh)
        port.workspaces.add("Experiments", docks=self.build,
                            tip="Sweeps: every trial of a study, its history, parameters and pruning; the best trial")
        port.workspaces.changed.connect(self._entered)
        self.sweep: SweepProcess | None = None
        self._creating = False     # a sweep started here is still making its study: do not read it yet
        self.ask: Callable[[Any], SweepRequest | None] = self._ask   # tests script the dialog's answer
        port.add_action(ActionSpec("new_sweep", "New S&weep…", "&Run", None, "", False,
                                   "Search the recipe and the design's sweep variables with Optuna (Experiments)",
                                   separator=True), self.new_sweep)
        port.add_close_guard(self._stop_on_close)

    @property
    def url(self) -> str:
        from trainer.store.runs import default_url

        return self.db_url or default_url()

    def build(self) -> list[QDockWidget]:
        from .panel import ExperimentsPanel

        self.panel = panel = ExperimentsPanel()
        panel.study_chosen.connect(self._choose)
        panel.open_graph.connect(self.open_graph)
        panel.export_run.connect(self.export)
        panel.retrain.connect(self.retrain)
        panel.new_sweep.connect(self.new_sweep)
        panel.stop_sweep.connect(self.stop_sweep)
        dock = QDockWidget("Experiments", self.port.owner)
        dock.setObjectName("experimentsDock")
        dock.setWidget(panel)
        self.port.add_docks([dock])
        self.port.theme_changed.connect(self._on_theme)
        self._on_theme(self.port.theme)
        return [dock]

    def _on_theme(self, theme: Any) -> None:
        from ..training.plot_theme import apply_plot_theme

        if self.panel is not None:
            apply_plot_theme(self.panel, theme.name)

    def _entered(self, name: str) -> None:
        if name == "Experiments":
            self.refresh(force=True)
            self.timer.start()
        else:
            self.timer.stop()

    # ------------------------------------------------------------------ reading
    def refresh(self, force: bool = False) -> None:
        """Re-read the studies and the chosen one (redrawn only when something changed)."""
        from trainer.store.runs import StoreError
        from trainer.sweep.report import list_studies, storage_for_reading, study_report

        if self.panel is None or self._creating:
            return
        try:
            if self.storage is None:
                self.storage = storage_for_reading(self.url)
            studies = list_studies(self.storage)
            self.panel.set_studies(studies)
            chosen = next((s for s in studies if s["name"] == self.study), None)
            if chosen is None:
                return
            key = (chosen["trials"], chosen["running"], self._progress())
            if force or key != self._last:
                self._last = key
                self.panel.set_report(study_report(self.storage, self.study))
        except (StoreError, OSError, ValueError) as exc:
            self.panel.status.setText(f"Cannot read the studies: {exc}")
        except Exception as exc:  # a database error from Optuna's storage: said, never a crash of the GUI
            self.panel.status.setText(f"Cannot read the studies: {type(exc).__name__}: {exc}")

    def _progress(self) -> int:
        """Intermediate values recorded so far in the study (a running trial's epochs change it)."""
        import optuna

        study = optuna.load_study(study_name=self.study, storage=self.storage)
        return sum(len(t.intermediate_values) for t in study.get_trials(deepcopy=False))

    def _choose(self, name: str) -> None:
        self.study = name
        self.refresh(force=True)

    # ------------------------------------------------------------------ acting
    def _run(self, run_id: int) -> Any:
        from trainer.store.runs import RunStore, StoreError

        try:
            store = RunStore(self.url, create=False)
            try:
                return store.run(run_id)
            finally:
                store.close()
        except StoreError as exc:
            self.port.log(f"Run {run_id} cannot be read: {exc}", "warning")
            return None

    def open_graph(self, run_id: int) -> None:
        run = self._run(run_id)
        if run is not None and self.port.open_snapshot(run.graph, run.name or f"run {run_id}"):
            self.port.workspaces.show("Design")     # the graph opened where it is seen and edited

    def export(self, run_id: int) -> None:
        if self._export_run is not None:
            self._export_run(run_id)

    def retrain(self, run_id: int) -> None:
        run = self._run(run_id)
        if run is None or self._training is None:
            return
        spec = retrain_spec(run.spec, run.name or f"run {run_id}", run.tags or ())
        self._training().start(spec)
        self.port.log(f"Retraining run {run_id} on train+val as a new run, tagged {', '.join(spec['tags'])}")


    # ------------------------------------------------------------------ sweeping
    def dataset(self) -> str:
        """The dataset a new sweep starts from: the last run's, as the Train dialog does; else the digits."""
        return (self._dataset() if self._dataset is not None else None) or "digits"

    def _ask(self, graph: Any) -> SweepRequest | None:
        dialog = SweepDialog(graph, self.port.owner, dataset=self.dataset())
        return dialog.request() if dialog.exec() == SweepDialog.DialogCode.Accepted else None

    def new_sweep(self) -> None:
        """Ask for a sweep of the design and start it; the workspace then follows its study."""
        if self.sweep is not None and self.sweep.running():
            self.port.status("A sweep is running: stop it first (Experiments > Stop Sweep)")
            return
        request = self.ask(self.port.graph)
        if request is None:
            return
        self.sweep = sweep = SweepProcess(self)
        # Not read until the sweep says its first trial started: a reader opening Optuna's storage while the
        # sweep creates its tables made the sweep fail ("no such table: version_info").
        self._creating = True
        sweep.line.connect(self._sweep_said)
        sweep.finished.connect(self._finished)
        sweep.start(self.port.graph, request, self.url)
        self.study = request.study
        self.port.log(f"Sweep {request.study} started: {request.trials} trials over {request.space}")
        self.port.workspaces.show("Experiments")
        if self.panel is not None:
            self.panel.set_sweeping(True)
            self.panel.status.setText(f"Sweep {request.study} starting: its study and first trials appear "
                                      "here in a moment")

    def _sweep_said(self, line: str) -> None:
        self.port.log(f"sweep: {line}")
        if line.startswith("trial "):       # a trial started or ended: read the study afresh
            self._creating, self.storage = False, None
            self.refresh(force=True)

    def stop_sweep(self) -> None:
        if self.sweep is not None:
            self.sweep.stop()

    def _finished(self, code: int) -> None:
        self._creating, self.storage = False, None
        self.port.log(f"Sweep {self.study} ended (exit status {code})", "info" if code == 0 else "warning")
        if self.panel is not None:
            self.panel.set_sweeping(False)
        self.refresh(force=True)

    def _stop_on_close(self) -> bool:
        self.stop_sweep()           # its trials stop with it; the study resumes with --study
        return True
