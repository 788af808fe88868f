"""The composition root: builds the application, its settings, theme and main window.

Everything the window uses is made here and passed down (no global state). Start-up is kept
short: nothing on the way to the first paint imports torch; the live analysis imports it on
its first run, after the window is on screen. With ``TORCH_STUDIO_REPORT_STARTUP=1`` the app
prints when its window has shown (and, given a file, when it has opened and fitted it), then
quits: ``benchmarks/startup_speed.py`` times that.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from pathlib import Path

from PySide6.QtCore import QSettings, QStandardPaths, QTimer
from PySide6.QtGui import QUndoStack
from PySide6.QtWidgets import QApplication

from graph_editor.ui.background import start_thread
from graph_editor.ui.canvas import GraphCanvas
from graph_editor.ui.controller import EditorController
from graph_editor.ui.live import LiveAnalysis

from .blocks import BlockLibrary
from .compile_check import install as install_compile_check
from .compile_warmup import start_compile_warmup
from .dialogs.import_module import ask_import
from .dialogs.template_gallery import pick_template
from .document import Document, starter_graph
from .experiments import install as install_experiments
from .export import install as install_export
from .finetune import install as install_finetune
from .inspect import install as install_inspect
from .main_window import APP_NAME, MainWindow, Services
from .platform_check import check_desktop
from .port import StudioPort
from .prompts import Prompts, QtPrompts
from .recovery import AUTOSAVE_MS, RecoveryStore
from .resources import IconSet
from .settings import StudioSettings
from .themes import ThemeManager
from .training import install as install_training
from .warmup import warm_up

ORGANISATION = "TorchStudio"
REPORT_ENV = "TORCH_STUDIO_REPORT_STARTUP"


def build(app: QApplication, settings: StudioSettings, prompts: Prompts, recovery_dir: Path,
          autosave_ms: int = AUTOSAVE_MS, runs_db: str | None = None,
          blocks_dir: Path | None = None) -> MainWindow:
    """Make the editing core, the theme and the window; tests call this with their own parts."""
    icons = IconSet()
    themes = ThemeManager(app, icons)
    themes.apply(settings.theme())
    controller = EditorController(starter_graph(), QUndoStack())
    live = LiveAnalysis(controller)
    document = Document(controller)
    canvas = GraphCanvas(controller, live)
    canvas.set_theme(themes.current.name)
    store = RecoveryStore(recovery_dir)
    window = MainWindow(Services(settings, prompts, icons, themes, controller, live, document, store, canvas,
                                 autosave_ms, runs_db, BlockLibrary(blocks_dir) if blocks_dir else None))
    for part in (controller, live, document, themes):  # they live and die with the window
        part.setParent(window)
    controller.undo_stack.setParent(controller)
    install_features(window, port_of(window), runs_db)
    for name in ("studio", "graph_editor"):
        logging.getLogger(name).addHandler(window.log.handler())
    settings.restore_window(window)
    window.workspaces.restore()
    return window


def port_of(window: MainWindow) -> StudioPort:
    """The narrow port the window's features plug in through (see :mod:`studio.port`)."""
    s = window.s
    return StudioPort(window, actions=window.action, menus=window.menus, toolbar=window.toolbar,
                      workspaces=window.workspaces, icons=s.icons, themes=s.themes, prompts=s.prompts,
                      controller=window.controller, live=window.live, document=window.document,
                      files=window.files, log=window.log, problems=window.problems,
                      problems_dock=window.docks["problems"], canvas=window.canvas, reveal=window.reveal,
                      add_close_guard=window.add_close_guard)


def install_features(window: MainWindow, port: StudioPort, runs_db: str | None) -> None:
    """Plug the features into the window through ``port``, in menu and workspace order (Run, Export;
    Design, Train, Runs, Inspect, Experiments); the window keeps them for its lifetime."""
    window.finetune = install_finetune(port)
    window.training = training = install_training(port, db_url=runs_db)
    window.export = install_export(port, db_url=runs_db, current_run=lambda: training.current_run)
    window.inspect = install_inspect(port, training=training.built_controller,
                                     current_run=lambda: training.current_run)
    window.compile_check = install_compile_check(port)
    window.experiments = install_experiments(port, runs_db, training=training.controller,
                                             dataset=training.last_dataset,
                                             export_run=lambda run_id: window.export.export("onnx", run_id))


def start(window: MainWindow, paths: list[str], warming: threading.Thread | None = None) -> None:
    """After the window shows: go back to the Train or Runs workspace if the studio closed in it
    (loaded after the ``warming`` import), recover a crashed session's work, then open the files
    asked for."""
    window.training.reopen_docks(window.s.settings.workspace(), after=warming)
    restored = window.files.offer_recovery(window.s.recovery)
    if paths and not restored:
        window.files.open(paths[0])
    else:
        window.canvas.fit_view()


def run(paths: list[str]) -> int:
    """Open the studio (on ``paths[0]`` if given) and run until the window closes. On an X11 desktop
    whose Qt plugin lacks libraries, say which and how to install them instead (Qt would abort)."""
    t0 = time.perf_counter()
    problem = check_desktop()
    if problem is not None:
        print(problem, file=sys.stderr, flush=True)
        return 1
    existing = QApplication.instance()
    app = existing if isinstance(existing, QApplication) else QApplication(sys.argv[:1])
    app.setOrganizationName(ORGANISATION)
    app.setApplicationName(APP_NAME)
    settings = StudioSettings(QSettings())
    data = Path(QStandardPaths.writableLocation(QStandardPaths.StandardLocation.AppDataLocation))
    window = build(app, settings, QtPrompts(pick_template, ask_import), data / "recovery",
                   blocks_dir=data / "blocks")
    window.show()
    if os.environ.get(REPORT_ENV):
        QTimer.singleShot(0, lambda: _report(app, window, paths, t0))
    else:
        QTimer.singleShot(0, lambda: start(window, paths, warm_up_passive()))
        start_compile_warmup(data / "compile-warmup.log")   # the templates' compiles, at idle priority
    return app.exec()


def warm_up_passive() -> threading.Thread:
    """Import torch in the background with OpenMP's idle threads sleeping instead of spinning.

    The studio runs torch on more than one thread (the analysis on the GUI thread, an export's
    verification on its own): each gets an OpenMP team, and an idle team that spins takes the CPU
    from the one working. The export dialog timed eager PyTorch at 129 ms against 1.1 ms for
    onnxruntime for the digits CNN (x117), where a plain process measures about 10x less for eager.
    The policy is read once, when torch loads; it is taken out of the environment again afterwards,
    so training workers started later spin as usual.
    """
    if "OMP_WAIT_POLICY" in os.environ:   # the user's own choice stands
        return warm_up()
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    thread = warm_up()

    def restore() -> None:
        thread.join()
        os.environ.pop("OMP_WAIT_POLICY", None)

    start_thread(threading.Thread(target=restore, name="omp-policy-restore", daemon=True))   # no collection there
    return thread


def _report(app: QApplication, window: MainWindow, paths: list[str], t0: float) -> None:
    """Benchmark mode: say when the window showed (and opened+fitted a file), then quit."""
    shown = time.perf_counter() - t0
    print(json.dumps({"event": "shown", "in_run_s": round(shown, 4),
                      "torch_imported": "torch" in sys.modules}), flush=True)
    if paths:
        t1 = time.perf_counter()
        ok = window.files.open(paths[0])
        app.processEvents()
        window.canvas.viewport().repaint()
        print(json.dumps({"event": "opened", "ok": ok, "nodes": len(window.controller.graph),
                          "open_fit_s": round(time.perf_counter() - t1, 4)}), flush=True)
    window.s.recovery.release()
    app.quit()
