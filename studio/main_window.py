"""The main window: the canvas in the centre, the docks around it, menus and toolbar from the
action table, the status bar, and the workspaces (Design, Train, Runs, ...) that show one flow's
docks at a time (:mod:`.workspaces`). Features (training, export, inspect, the compile check) plug
in through the narrow :class:`~studio.port.StudioPort` the composition root makes, never this class.
It only lays things out and routes commands: files live in :mod:`.files`, edits in the
controller, checking in the live analysis, questions in the prompts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QAction, QActionGroup, QCloseEvent, QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QDockWidget, QMainWindow, QMenu, QToolBar, QWidget

from graph_editor.model import Inference, Problem
from graph_editor.ui.canvas import GraphCanvas
from graph_editor.ui.controller import EditorController
from graph_editor.ui.live import LiveAnalysis

from .actions import build_actions, build_menus, build_toolbar, refresh_icons
from .blocks import BlockLibrary
from .docks.inspector import InspectorDock
from .docks.log import LogDock
from .docks.palette import PaletteDock
from .docks.problems import ProblemsDock
from .docks.summary import SummaryDock
from .document import Document
from .files import FileActions
from .prompts import Prompts
from .recovery import AUTOSAVE_MS, Autosaver, RecoveryStore
from .resources import IconSet
from .settings import THEMES, StudioSettings
from .status import GraphStatus, is_blank
from .themes import Theme, ThemeManager
from .widgets import named
from .workspaces import Workspaces

if TYPE_CHECKING:
    from .compile_check import CompileCheck
    from .experiments import ExperimentsHook
    from .export import ExportHook
    from .finetune import FinetuneHook
    from .inspect import InspectHook
    from .training import TrainingHook

APP_NAME = "Torch Studio"
READABLE_ZOOM = 1.0  # a node revealed from Problems or Summary is shown at least this large
LEGIBLE_ZOOM = 0.45  # below this, node titles and shapes are too small to read


@dataclass
class Services:
    """Everything the window works with, built once by the composition root (``studio.app``)."""

    settings: StudioSettings
    prompts: Prompts
    icons: IconSet
    themes: ThemeManager
    controller: EditorController
    live: LiveAnalysis
    document: Document
    recovery: RecoveryStore
    canvas: GraphCanvas
    autosave_ms: int = AUTOSAVE_MS
    runs_db: str | None = None  # the run store's URL; None: the user's default store
    blocks: BlockLibrary | None = None  # saved blocks for the palette; None: none kept


class MainWindow(QMainWindow):
    """Torch Studio's window. Its features plug in through a :class:`~studio.port.StudioPort` made by
    the composition root (:func:`studio.app.build`), which keeps them here for their lifetime."""

    training: TrainingHook        # Run menu, Train and Runs workspaces
    export: ExportHook            # Export menu, the toolbar's one-click ONNX
    inspect: InspectHook          # the Inspect workspace
    experiments: ExperimentsHook  # the Experiments workspace (sweeps)
    compile_check: CompileCheck   # Graph > Check Compile: graph breaks into Problems
    finetune: FinetuneHook        # Graph > Freeze / Unfreeze, Learning-Rate Multiplier, Replace Head

    def __init__(self, services: Services, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.s = services
        self.controller, self.live, self.document = services.controller, services.live, services.document
        self.canvas = services.canvas
        self.setObjectName("mainWindow")
        self.setWindowIcon(services.icons.icon("app"))
        self.setCentralWidget(self.canvas)
        self.setAcceptDrops(True)
        self.setDockNestingEnabled(True)
        self._build_docks()
        self.files = FileActions(self.document, services.settings, services.prompts, self, self.log.append,
                                 services.recovery.folder.parent / "weights", self)
        self.action = build_actions(self, self._handlers(), services.icons)
        self.recent_menu = QMenu("Open &Recent", self)
        self.menus = build_menus(self.menuBar(), self.action, recent=self.recent_menu)
        self._close_guards: list[Callable[[], bool]] = []
        self.toolbar = named(QToolBar("Toolbar"), "mainToolbar")
        self.toolbar.setMovable(False)
        self.toolbar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonIconOnly)
        build_toolbar(self.toolbar, self.action)
        self.workspaces = Workspaces(self, self.canvas, self.menus["&View"], services.settings)
        self.addToolBar(self.workspaces.bar)
        self.addToolBar(self.toolbar)
        self.workspaces.add("Design", docks=list(self.docks.values()), canvas=True,
                            tip="Draw and check the network: canvas, layers, inspector, summary")
        self._build_view_menu()
        self.status = GraphStatus(self.statusBar())
        self.autosaver = Autosaver(self.document, services.recovery, services.autosave_ms, self)
        self.autosaver.failed.connect(lambda message: self.log.append(message, "error"))
        self._connect()
        self._fill_recent(services.settings.recent_files())
        self.refresh_blocks()
        self._update_title()
        self._on_selection(self.controller.selection)
        screen = self.screen().availableGeometry()
        self.resize(min(1600, int(screen.width() * 0.9)), min(1000, int(screen.height() * 0.9)))
        self.workspaces.show("Design")

    # ------------------------------------------------------------------ layout
    def _build_docks(self) -> None:
        self.layers = PaletteDock()
        self.inspector = InspectorDock(self.controller)
        self.summary = SummaryDock()
        self.problems = ProblemsDock(self.s.icons)
        self.log = LogDock()
        area = Qt.DockWidgetArea
        self.docks: dict[str, QDockWidget] = {}
        for key, title, widget, where in (
            ("palette", "Layers", self.layers, area.LeftDockWidgetArea),
            ("inspector", "Inspector", self.inspector, area.RightDockWidgetArea),
            ("summary", "Summary", self.summary, area.BottomDockWidgetArea),
            ("problems", "Problems", self.problems, area.BottomDockWidgetArea),
            ("log", "Log", self.log, area.BottomDockWidgetArea),
        ):
            dock = named(QDockWidget(title, self), f"{key}Dock")
            dock.setWidget(widget)
            self.addDockWidget(where, dock)
            self.docks[key] = dock
        self.splitDockWidget(self.docks["summary"], self.docks["problems"], Qt.Orientation.Horizontal)
        self.tabifyDockWidget(self.docks["problems"], self.docks["log"])
        self.resizeDocks([self.docks["palette"], self.docks["inspector"]], [230, 330], Qt.Orientation.Horizontal)
        self.resizeDocks([self.docks["summary"], self.docks["problems"]], [1000, 420], Qt.Orientation.Horizontal)
        self.resizeDocks([self.docks["summary"]], [260], Qt.Orientation.Vertical)
        self.docks["problems"].raise_()

    def _build_view_menu(self) -> None:
        menu = self.menus["&View"]
        menu.addAction(self.toolbar.toggleViewAction())
        menu.addSeparator()
        group = QActionGroup(self)
        group.setExclusive(True)
        self.theme_actions: dict[str, QAction] = {}
        for name in THEMES:
            action = named(QAction(f"{name.capitalize()} Theme", self, checkable=True), f"action_theme_{name}")
            action.setChecked(name == self.s.themes.current.name)
            action.triggered.connect(lambda _c=False, n=name: self.set_theme(n))
            group.addAction(action)
            menu.addAction(action)
            self.theme_actions[name] = action

    # ------------------------------------------------------------------ wiring
    def _handlers(self) -> dict[str, Callable[[], object]]:
        c, f = self.controller, self.files
        return {
            "new": f.new, "new_template": f.new_from_template, "open": f.open, "save": f.save,
            "save_as": f.save_as, "import_module": f.import_module, "quit": self.close,
            "undo": c.undo_stack.undo, "redo": c.undo_stack.redo,
            "cut": lambda: c.cut(c.selection), "copy": self.copy,
            "paste": lambda: c.paste(at=self.view_centre()), "duplicate": lambda: c.duplicate(c.selection),
            "delete": self.canvas.delete_selection, "select_all": c.select_all,
            "auto_layout": self.auto_layout, "fit_view": self.canvas.fit_view, "validate": self.validate,
            "save_block": self.save_block,
        }

    def _connect(self) -> None:
        c, stack = self.controller, self.controller.undo_stack
        stack.canUndoChanged.connect(self.action["undo"].setEnabled)
        stack.canRedoChanged.connect(self.action["redo"].setEnabled)
        stack.undoTextChanged.connect(self._on_undo_text)
        stack.redoTextChanged.connect(self._on_redo_text)
        self.action["undo"].setEnabled(stack.canUndo())
        self.action["redo"].setEnabled(stack.canRedo())
        c.selection_changed.connect(self._on_selection)
        c.refused.connect(self._on_refused)
        self.live.inferred.connect(self._on_inferred)
        self.live.checking.connect(self.status.show_checking)   # a big graph's verdict is being made anew
        self.live.checking.connect(self.problems.show_checking)
        self.live.analyzed.connect(self._on_analyzed)
        self.live.analyzed.connect(self.status.show_analysis)
        self.problems.node_chosen.connect(self.reveal)
        self.summary.node_chosen.connect(self.reveal)
        self.layers.activated.connect(self.place_layer)
        self.layers.block_activated.connect(lambda text: self.controller.paste(text, at=self.view_centre()))
        self.layers.block_removed.connect(self.remove_block)
        self.document.changed.connect(self._update_title)
        self.files.recent_changed.connect(self._fill_recent)
        self.files.opened.connect(lambda _name: self.show_whole_graph())
        self.canvas.hint.connect(lambda text: self.statusBar().showMessage(text, 6000))
        self.canvas.node_activated.connect(self.edit_node)
        self.s.themes.changed.connect(self._on_theme)

    def _on_undo_text(self, text: str) -> None:
        self.action["undo"].setText(f"&Undo {text}".rstrip())

    def _on_redo_text(self, text: str) -> None:
        self.action["redo"].setText(f"&Redo {text}".rstrip())

    def _on_selection(self, ids: list) -> None:
        for key in ("cut", "copy", "duplicate", "delete"):
            self.action[key].setEnabled(bool(ids))

    def _on_refused(self, reason: str) -> None:
        self.statusBar().showMessage(reason, 6000)
        self.log.append(reason, "warning")

    def _on_inferred(self, inference: Inference) -> None:
        self._show_problems(inference)
        self.inspector.show_shapes(inference.shapes, inference.port_shapes)
        graph = self.controller.graph
        self.summary.show_inference(inference.shapes, {i: n.type for i, n in graph.nodes.items()}, inference.order)

    def _show_problems(self, inference: Inference) -> None:
        if is_blank(self.controller.graph):  # a new network: nothing red before the user did anything
            self._show_blank_problems()
            self.status.show_blank()
        else:
            self.problems.set_problems(inference.problems)
            self.status.show_inference(inference)

    def _on_analyzed(self, analysis: object, problems: list[Problem]) -> None:
        self.summary.show_analysis(analysis, problems)
        # what the build on meta adds to the graph's own problems (a reserved node id, a Module node whose
        # class cannot be imported, a billion-parameter warning): the verdict `torch-studio validate` prints
        inference = self.live.inference
        own = inference.problems if inference is not None else []
        if is_blank(self.controller.graph):
            self._show_blank_problems()
        else:
            self.problems.set_problems([p for p in problems if p not in own], source="build")
        if analysis is None and is_blank(self.controller.graph):   # nothing to fix yet: say what to do
            self.summary.totals.setText("A new network: add layers between Input and Output to see shapes, "
                                        "parameters and FLOPs.")

    def _show_blank_problems(self) -> None:
        """A new network: no problems from any source, and the header says what to do first."""
        self.problems.set_problems([])
        self.problems.set_problems([], source="build")
        self.problems.header.setText("A new network: drag layers from Layers (or press Tab on the canvas) "
                                     "and wire Input → … → Output.")

    def _update_title(self) -> None:
        self.setWindowTitle(f"{self.document.name}[*] — {APP_NAME}")
        self.setWindowModified(self.document.dirty)

    def _fill_recent(self, files: list[str]) -> None:
        """Refill Open Recent; the old entries are deleted later (one of them may be the action
        whose ``triggered`` is running now: opening a recent file reorders the list)."""
        for action in self.recent_menu.actions():
            self.recent_menu.removeAction(action)
            action.deleteLater()
        for i, path in enumerate(files, 1):
            action = self.recent_menu.addAction(f"&{i % 10}  {Path(path).name}")
            action.setToolTip(path)
            action.setStatusTip(path)
            action.triggered.connect(lambda _c=False, p=path: self.files.open_recent(p))
        if not files:
            self.recent_menu.addAction("No recent files").setEnabled(False)
        self.recent_menu.menuAction().setEnabled(True)

    # ------------------------------------------------------------------ commands
    def view_centre(self) -> tuple[float, float]:
        """The scene point at the centre of the canvas (where pasted and placed nodes go)."""
        p: QPointF = self.canvas.mapToScene(self.canvas.viewport().rect().center())
        return (p.x(), p.y())

    def place_layer(self, type_: str) -> None:
        """Add a layer at the centre of the view (palette double-click or Enter)."""
        if self.controller.add_node(type_, self.view_centre()) is None and self.controller.last_added:
            self.controller.select([self.controller.last_added])

    def edit_node(self, node_id: str) -> None:
        """Double-click on a node: its parameters, in front, ready to type."""
        self.controller.select([node_id])
        dock = self.docks["inspector"]
        dock.show()
        dock.raise_()
        self.inspector.focus_first_field()

    def copy(self) -> None:
        if self.controller.selection:
            self.controller.copy(self.controller.selection)
            self.statusBar().showMessage(f"Copied {len(self.controller.expand_ids(self.controller.selection))} "
                                         "nodes", 3000)

    def show_whole_graph(self) -> None:
        """Fit the graph; only a long network that would be drawn too small to read is shown from
        its start at the smallest legible zoom instead (the minimap shows the whole)."""
        self.canvas.fit_view()
        zoom = self.canvas.zoom
        if zoom >= LEGIBLE_ZOOM or not self.controller.graph.nodes:
            return
        rect = self.canvas.graph_scene.items_rect()
        self.canvas.scale(LEGIBLE_ZOOM / zoom, LEGIBLE_ZOOM / zoom)
        half_width = self.canvas.viewport().width() / LEGIBLE_ZOOM / 2
        self.canvas.centerOn(rect.left() - 40 + half_width, rect.center().y())
        self.canvas.minimap.update()

    def save_block(self) -> bool:
        """Keep the selected layers as a named block in the palette."""
        library, ids = self.s.blocks, self.controller.expand_ids(self.controller.selection)
        if library is None or not ids:
            self._on_refused("select the layers to keep as a block")
            return False
        name = self.s.prompts.block_name(self, "block")
        if not name:
            return False
        try:
            library.save(name, self.controller.copy(ids, to_clipboard=False))
        except (ValueError, OSError) as exc:
            self.s.prompts.error(self, "Cannot save the block", str(exc))
            return False
        self.refresh_blocks()
        self.log.append(f"Saved {len(ids)} layers as the block '{name}'")
        return True

    def remove_block(self, name: str) -> None:
        if self.s.blocks is not None:
            self.s.blocks.remove(name)
            self.refresh_blocks()
            self.log.append(f"Deleted the block '{name}'")

    def refresh_blocks(self) -> None:
        if self.s.blocks is None:
            return
        blocks, problems = self.s.blocks.blocks()
        self.layers.set_blocks(blocks)
        for problem in problems:
            self.log.append(f"Block not shown: {problem}", "warning")

    def auto_layout(self) -> None:
        if self.controller.auto_layout() is None:
            self.canvas.fit_view()

    def validate(self) -> Inference:
        """Check now; the problems dock comes to the front when there are any."""
        inference = self.live.refresh()
        errors = [p for p in inference.problems if p.severity == "error"]
        if errors:
            self.log.append(f"Validate: {len(errors)} problem{'s' * (len(errors) != 1)}", "error")
            self.docks["problems"].show()
            self.docks["problems"].raise_()
        else:
            self.log.append("Validate: the graph is valid", "info")
        return inference

    def reveal(self, node_id: str) -> None:
        """Select a node and bring it into view (from the problems or the summary)."""
        self.controller.select([node_id])
        scene = self.canvas.graph_scene
        owner = scene.collapsed_owner(node_id)
        item = scene.boxes.get(owner) if owner else scene.item_for(node_id)
        if item is not None:
            if self.canvas.zoom < READABLE_ZOOM:
                factor = READABLE_ZOOM / self.canvas.zoom
                self.canvas.scale(factor, factor)
            self.canvas.centerOn(item)
            self.canvas.minimap.update()

    def set_theme(self, name: str) -> None:
        self.s.settings.set_theme(name)
        self.s.themes.apply(name)

    def _on_theme(self, theme: Theme) -> None:
        refresh_icons(self.action, self.s.icons)
        self.setWindowIcon(self.s.icons.icon("app"))
        self.canvas.set_theme(theme.name)
        if self.live.inference is not None and self.live.up_to_date:   # (one being made anew is shown when it comes)
            self._show_problems(self.live.inference)   # their icons in the theme's colours; the summary stays
        for name, action in self.theme_actions.items():
            action.setChecked(name == theme.name)

    # ------------------------------------------------------------------ window events
    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if _graph_files(event):
            event.acceptProposedAction()
        else:
            super().dragEnterEvent(event)

    def dropEvent(self, event: QDropEvent) -> None:
        paths = _graph_files(event)
        if paths:
            event.acceptProposedAction()
            self.files.open(paths[0])
        else:
            super().dropEvent(event)

    def add_close_guard(self, guard: Callable[[], bool]) -> None:
        """``guard()`` is asked, after unsaved changes, whether the window may close."""
        self._close_guards.append(guard)

    def closeEvent(self, event: QCloseEvent) -> None:
        if not self.files.maybe_save() or not all(guard() for guard in self._close_guards):
            event.ignore()
            return
        self.workspaces.save()
        self.s.settings.save_window(self)
        self.s.settings.sync()
        self.s.recovery.release()
        event.accept()


def _graph_files(event: QDragEnterEvent | QDropEvent) -> list[str]:
    data = event.mimeData()
    if not data.hasUrls():
        return []
    return [u.toLocalFile() for u in data.urls() if u.isLocalFile() and u.toLocalFile().endswith(".json")]
