"""The narrow port through which a feature plugs into the main window.

A feature (training, export, inspect, the compile check) is handed a :class:`StudioPort`, made by
the composition root (:func:`studio.app.build`), never the main window itself: it adds its commands
to the window's one action table, its workspace, and reads and tells what it needs through here.
What each feature uses:

Each feature is a package ``studio/<feature>/`` whose ``install(port, ...)`` plugs it in. What each uses:

- ``training``: ``add_action`` (Run menu, the toolbar's Train), ``workspaces`` (Train, Runs),
  ``add_hidden_dock`` (its docks), ``owner`` (the parent of its objects and dialogs; its plot colours),
  ``graph``, ``selection_changed``, ``open_snapshot``, ``document_name``, ``prompts``, ``log``,
  ``status``/``status_text``/``clear_status``, ``reveal``, ``icon``/``theme``, a close guard.
- ``export``: ``add_action`` and ``menu`` (Export menu, the toolbar's ONNX), ``owner`` (dialogs),
  ``graph``, ``document_path``, ``log``, ``reveal``, a close guard.
- ``inspect``: ``workspaces`` (Inspect), ``add_docks``, ``canvas``, ``graph``, ``select``,
  ``selection_changed``, ``set_problems``, ``theme``, ``log``, a close guard.
- ``compile_check``: ``add_action`` (Graph > Check Compile), ``inferred``, ``graph``,
  ``set_problems``/``show_problems``, ``log``, ``status``, a close guard.
- ``experiments`` and ``finetune`` likewise.

The window itself is not handed out: ``owner`` is it as a plain ``QWidget`` (what Qt needs to parent a
dialog or a dock), and what a feature does to the window (menus, docks, the status bar) goes through
the methods here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, SignalInstance
from PySide6.QtGui import QAction, QIcon, QKeySequence
from PySide6.QtWidgets import QDockWidget, QMainWindow, QMenu, QToolBar, QWidget

from graph_editor.model import Graph, Problem
from graph_editor.ui.canvas import GraphCanvas
from graph_editor.ui.controller import EditorController
from graph_editor.ui.live import LiveAnalysis
from graph_editor.ui.training_edits import TrainingEdits

from .actions import ActionSpec, make_action
from .docks.log import LogDock
from .docks.problems import ProblemsDock
from .document import Document
from .files import FileActions
from .prompts import Prompts
from .resources import IconSet
from .themes import Theme, ThemeManager
from .workspaces import Workspaces

LAST_MENU = "&View"  # a feature's new menu goes before it


class StudioPort:
    """What a feature may do to the main window, and nothing more.

    Made by the composition root (:func:`studio.app.port_of`) from the window and its parts; a
    feature sees the window only as :attr:`owner`, a ``QWidget``.
    """

    def __init__(self, host: QMainWindow, *, actions: dict[str, QAction], menus: dict[str, QMenu],
                 toolbar: QToolBar, workspaces: Workspaces, icons: IconSet, themes: ThemeManager,
                 prompts: Prompts, controller: EditorController, live: LiveAnalysis, document: Document,
                 files: FileActions, log: LogDock, problems: ProblemsDock, problems_dock: QDockWidget,
                 canvas: GraphCanvas, reveal: Callable[[str], None],
                 add_close_guard: Callable[[Callable[[], bool]], None]) -> None:
        self._window, self.workspaces, self.prompts, self.canvas = host, workspaces, prompts, canvas
        self._actions, self._menus, self._toolbar = actions, menus, toolbar
        self._icons, self._themes = icons, themes
        self._controller, self._live, self._document, self._files = controller, live, document, files
        self._log, self._problems, self._problems_dock = log, problems, problems_dock
        self._reveal, self._add_close_guard = reveal, add_close_guard
        self._toolbar_menu: str | None = None   # the menu of the last button a feature put on the toolbar
        self._icon_rows: list[ActionSpec] = []  # repainted in a new theme's colours
        themes.changed.connect(self._on_theme)

    @property
    def owner(self) -> QWidget:
        """What a feature's dialogs, docks and objects are parented to (they close with the window)."""
        return self._window

    # ------------------------------------------------------------------ commands
    def add_action(self, spec: ActionSpec, handler: Callable[[], object]) -> QAction:
        """Add a row to the window's one action table: its QAction (``action_<key>``) in the menu
        ``spec.menu`` (made before View when new), on the toolbar when ``spec.toolbar``. A key the
        table has, or a shortcut another action of the window holds, is refused (ValueError)."""
        if spec.key in self._actions:
            raise ValueError(f"action {spec.key!r}: the window's action table has one already")
        action = make_action(spec, handler, self._window, self._icons)
        holder = self._shortcut_holder(action)
        if holder is not None:
            action.setParent(None)
            action.deleteLater()
            keys = ", ".join(k.toString() for k in action.shortcuts())
            raise ValueError(f"action {spec.key!r}: the shortcut {keys} is taken by {holder}")
        menu = self.menu(spec.menu)
        if spec.separator and menu.actions():
            menu.addSeparator()
        menu.addAction(action)
        if spec.toolbar:
            if self._toolbar.actions() and spec.menu != self._toolbar_menu:
                self._toolbar.addSeparator()
            self._toolbar.addAction(action)
            self._toolbar_menu = spec.menu
        if spec.icon:
            self._icon_rows.append(spec)
        self._actions[spec.key] = action
        return action

    def menu(self, name: str) -> QMenu:
        """The menu bar's menu ``name`` (e.g. ``"&Run"``), made before View when there is none yet."""
        if name not in self._menus:
            menu = QMenu(name, self._window)
            bar = self._window.menuBar()
            last = self._menus.get(LAST_MENU)
            if last is not None:
                bar.insertMenu(last.menuAction(), menu)
            else:
                bar.addMenu(menu)
            self._menus[name] = menu
        return self._menus[name]

    def _shortcut_holder(self, action: QAction) -> str | None:
        keys = {k.toString() for k in action.shortcuts() if not k.isEmpty()}
        if not keys:
            return None
        for other in self._window.findChildren(QAction):
            if other is not action and keys & {k.toString() for k in other.shortcuts() if not k.isEmpty()}:
                return other.objectName() or other.text().replace("&", "")
        return None

    def add_docks(self, docks: Sequence[QDockWidget], widths: Sequence[float] = (), height: float = 0.0,
                  area: Qt.DockWidgetArea = Qt.DockWidgetArea.BottomDockWidgetArea) -> None:
        """Dock ``docks`` side by side in ``area`` (the bottom by default), each ``widths[i]`` of the
        window's width and ``height`` of its height where given (fractions)."""
        w = self._window
        for dock in docks:
            w.addDockWidget(area, dock)
        for left, right in zip(docks, docks[1:], strict=False):
            w.splitDockWidget(left, right, Qt.Orientation.Horizontal)
        if widths:
            w.resizeDocks(list(docks), [int(w.width() * f) for f in widths], Qt.Orientation.Horizontal)
        if height:
            w.resizeDocks([docks[0]], [int(w.height() * height)], Qt.Orientation.Vertical)

    def add_hidden_dock(self, dock: QDockWidget) -> None:
        """Dock ``dock`` at the bottom, hidden: a workspace shows it (see :class:`~studio.workspaces.Workspaces`)."""
        self._window.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, dock)
        dock.hide()

    def add_close_guard(self, guard: Callable[[], bool]) -> None:
        """``guard()`` is asked, after unsaved changes, whether the window may close."""
        self._add_close_guard(guard)

    # ------------------------------------------------------------------ telling the user
    def log(self, text: str, level: str = "info") -> None:
        """A line in the Log dock (``info``, ``warning`` or ``error``)."""
        self._log.append(text, level)

    def status(self, text: str, ms: int = 6000) -> None:
        """A message in the status bar for ``ms`` milliseconds."""
        self._window.statusBar().showMessage(text, ms)

    def status_text(self) -> str:
        """What the status bar says now ("" when nothing)."""
        return self._window.statusBar().currentMessage()

    def clear_status(self) -> None:
        self._window.statusBar().clearMessage()

    def set_problems(self, problems: Sequence[Problem], source: str) -> None:
        """Replace the Problems dock's entries from ``source`` (each feature its own)."""
        self._problems.set_problems(problems, source=source)

    def show_problems(self) -> None:
        """Bring the Problems dock to the front."""
        self._problems_dock.show()
        self._problems_dock.raise_()

    # ------------------------------------------------------------------ the graph being edited
    @property
    def graph(self) -> Graph:
        return self._controller.graph

    def selection(self) -> list[str]:
        """The selected node and block ids."""
        return self._controller.selection

    @property
    def training_edits(self) -> TrainingEdits:
        """Fine-tuning and sweep intents on the design (freeze, learning-rate multipliers, replace head,
        sweep variables), each one undo step: the editor's own, and nothing else of it."""
        return self._controller

    def select(self, node_ids: Sequence[str]) -> None:
        self._controller.select(list(node_ids))

    @property
    def selection_changed(self) -> SignalInstance:
        """Emits the selected node ids."""
        return self._controller.selection_changed

    @property
    def inferred(self) -> SignalInstance:
        """Emits the shapes and problems of the graph after each edit (an ``Inference``)."""
        return self._live.inferred

    def reveal(self, node_id: str) -> None:
        """Select a node and bring it into view on the canvas."""
        self._reveal(node_id)

    @property
    def document_name(self) -> str:
        return self._document.name

    @property
    def document_path(self) -> Path | None:
        return self._document.path

    @property
    def run_source(self) -> str:
        """What a run of the graph is named after: the file it is or was made from, else its title."""
        origin = self._document.origin
        return origin.name if origin is not None else self._document.name

    def open_snapshot(self, data: dict[str, Any], title: str) -> bool:
        """Open a graph snapshot (a run's graph) as a new unsaved document titled ``title``."""
        return self._files.open_snapshot(data, title)

    # ------------------------------------------------------------------ theme
    def icon(self, name: str) -> QIcon:
        """The icon ``name`` in the current theme's colours."""
        return self._icons.icon(name)

    @property
    def theme(self) -> Theme:
        return self._themes.current

    @property
    def graph_replaced(self) -> SignalInstance:
        """Emitted (with the new graph's name or path) when another graph is opened, made or recovered."""
        return self._files.opened

    @property
    def theme_changed(self) -> SignalInstance:
        """Emits the new :class:`~studio.themes.Theme`."""
        return self._themes.changed

    def _on_theme(self, _theme: Theme) -> None:
        for spec in self._icon_rows:
            self._actions[spec.key].setIcon(self._icons.icon(spec.icon))


def shortcut_text(action: QAction) -> str:
    """The action's shortcut as the user reads it (``Ctrl+T``), for hints that name it."""
    return action.shortcut().toString(QKeySequence.SequenceFormat.NativeText)
