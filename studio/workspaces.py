"""Workspaces: Design, Train, Runs (and any a feature adds) as full-window layouts of their own
docks, switched from the mode bar at the top of the window or with Ctrl+1, Ctrl+2, ...

A workspace is a name, the docks it shows and whether the canvas shows in it. Entering one hides
every other workspace's docks and, where the canvas does not belong, the canvas too, so its
docks fill the window; the dock layout each workspace was left in is kept (and saved with the
settings), so switching never squashes the canvas with another flow's docks. The View menu lists
every dock, the workspaces and Reset Layout (the current workspace back to how it first looked).

Adding a workspace is one call, e.g. from a feature that builds its own view::

    window.workspaces.add("Inspect", docks=[autograd_dock, memory_dock], canvas=True)

``docks`` may also be a function returning them, called on the first switch to the workspace
(for views that are expensive to build); a dock not yet in the window is added at the bottom.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from PySide6.QtCore import QByteArray, QObject, Qt, Signal
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QDockWidget, QMainWindow, QMenu, QToolBar, QWidget

from .settings import StudioSettings
from .widgets import named

Docks = Sequence[QDockWidget] | Callable[[], Sequence[QDockWidget]]
STATE_VERSION = 1


@dataclass
class Workspace:
    """One full-window layout: ``docks`` shown in it, the canvas or not."""

    name: str
    canvas: bool
    action: QAction
    docks: list[QDockWidget] = field(default_factory=list)
    build: Callable[[], Sequence[QDockWidget]] | None = None  # makes the docks on first entry
    default_state: QByteArray | None = None  # how it looked when first entered (Reset Layout)
    state: QByteArray | None = None  # how the user left it


class Workspaces(QObject):
    """The window's workspaces, its mode bar and the View menu's dock list."""

    changed = Signal(str)  # the workspace now shown

    def __init__(self, window: QMainWindow, central: QWidget, view_menu: QMenu,
                 settings: StudioSettings | None = None) -> None:
        super().__init__(window)
        self.window, self.central, self.settings = window, central, settings
        self.items: dict[str, Workspace] = {}
        self.current: str | None = None
        self._restored = False
        self.bar = named(QToolBar("Workspaces", window), "workspaceBar")
        self.bar.setMovable(False)
        self.bar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.bar.setStyleSheet("QToolButton { padding: 3px 10px; }"
                               "QToolButton:checked { font-weight: bold; border: none;"
                               " border-bottom: 2px solid palette(highlight); }")
        self.group = QActionGroup(self)
        self.group.setExclusive(True)
        self.menu = QMenu("&Workspace", window)
        self.docks_menu = view_menu
        self._dock_actions: dict[str, QAction] = {}
        view_menu.addMenu(self.menu)
        view_menu.addSeparator()
        self.reset_action = named(QAction("&Reset Layout", window,
                                          statusTip="Put the docks of this workspace back where they first were"),
                                  "action_reset_layout")
        self.reset_action.triggered.connect(self.reset_layout)
        view_menu.addAction(self.reset_action)      # every dock goes above it, whenever it is made
        view_menu.addSeparator()                    # what the window adds to View comes after
        self.menu.addSeparator()

    # ------------------------------------------------------------------ registering
    def add(self, name: str, docks: Docks = (), canvas: bool = False, tip: str = "") -> Workspace:
        """Register a workspace showing ``docks`` (a list, or a function that builds them on first
        entry) and the canvas when ``canvas``; it gets a mode-bar button and Ctrl+<its number>."""
        if name in self.items:
            raise ValueError(f"a workspace named {name!r} exists already")
        action = named(QAction(name, self.window, checkable=True), f"workspace_{name.lower()}")
        number = len(self.items) + 1
        if number <= 9:
            action.setShortcut(QKeySequence(f"Ctrl+{number}"))
        keys = action.shortcut().toString(QKeySequence.SequenceFormat.NativeText)
        action.setToolTip(f"{tip or name + ' workspace'} ({keys})" if keys else tip or name)
        action.setStatusTip(tip or f"The {name} workspace")
        action.triggered.connect(lambda _c=False, n=name: self.show(n))
        self.group.addAction(action)
        self.bar.addAction(action)
        if self.menu.actions():
            self.menu.insertAction(self.menu.actions()[-1], action)
        else:
            self.menu.addAction(action)
        ws = Workspace(name, canvas, action)
        if callable(docks):
            ws.build = docks
        else:
            ws.docks = list(docks)
            self.list_docks(ws.docks)
        self.items[name] = ws
        if self._restored and self.settings is not None:
            ws.state = self.settings.workspace_state(name)
        return ws

    def list_docks(self, docks: Sequence[QDockWidget]) -> None:
        """Put the docks' show/hide actions in the View menu (once each), before Reset Layout."""
        for dock in docks:
            if dock.objectName() in self._dock_actions:
                continue
            action = dock.toggleViewAction()
            self._dock_actions[dock.objectName()] = action
            self.docks_menu.insertAction(self.reset_action, action)

    def docks(self, name: str) -> list[QDockWidget]:
        """The docks of workspace ``name`` (built now if they are built on first use)."""
        ws = self.items[name]
        if ws.build is not None:
            build, ws.build = ws.build, None
            ws.docks = list(build())
            for dock in ws.docks:
                if self.window.dockWidgetArea(dock) == Qt.DockWidgetArea.NoDockWidgetArea:
                    self.window.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, dock)
            self.list_docks(ws.docks)
        return ws.docks

    @property
    def built(self) -> set[str]:
        return {name for name, ws in self.items.items() if ws.build is None}

    # ------------------------------------------------------------------ switching
    def show(self, name: str) -> None:
        """Switch to workspace ``name``: its docks in the layout it was left in, the others hidden."""
        if name not in self.items:
            raise KeyError(f"no workspace named {name!r} (there are {', '.join(self.items)})")
        target = self.items[name]
        if self.current == name:
            target.action.setChecked(True)
            return
        if self.current is not None:
            self.items[self.current].state = self.window.saveState(STATE_VERSION)
        mine = self.docks(name)
        for other, ws in self.items.items():
            if other != name and ws.build is None:
                for dock in ws.docks:
                    if dock not in mine:
                        dock.hide()
        self.central.setVisible(target.canvas)
        for dock in mine:
            dock.show()
        first_time = target.default_state is None
        if first_time:
            target.default_state = self.window.saveState(STATE_VERSION)
        if target.state is not None:
            self.window.restoreState(target.state, STATE_VERSION)  # docks made since stay as set above
        self.central.setVisible(target.canvas)
        self.current = name
        target.action.setChecked(True)
        self.changed.emit(name)

    def reveal(self, dock: QDockWidget) -> None:
        """Bring ``dock`` forward, switching to the workspace it belongs to."""
        owner = next((n for n, ws in self.items.items() if dock in ws.docks), None)
        if owner is not None and owner != self.current:
            self.show(owner)
        dock.show()
        dock.raise_()

    def reset_layout(self) -> None:
        """The current workspace's docks back where they were when it was first shown."""
        if self.current is None:
            return
        ws = self.items[self.current]
        if ws.default_state is not None:
            self.window.restoreState(ws.default_state, STATE_VERSION)
        for dock in ws.docks:
            dock.show()
        self.central.setVisible(ws.canvas)
        ws.state = self.window.saveState(STATE_VERSION)

    # ------------------------------------------------------------------ persisting
    def restore(self) -> str | None:
        """Take the layouts saved at the last close and show the current workspace in its own;
        returns the workspace that showed last (to switch to once its docks can be built)."""
        self._restored = True
        if self.settings is None:
            return None
        for name, ws in self.items.items():
            ws.state = self.settings.workspace_state(name) or ws.state
        if self.current is not None:
            name, self.current = self.current, None
            self.show(name)
        last = self.settings.workspace()
        return last if last in self.items else None

    def save(self) -> None:
        """Keep every workspace's layout and which one shows (at close)."""
        if self.settings is None or self.current is None:
            return
        self.items[self.current].state = self.window.saveState(STATE_VERSION)
        for name, ws in self.items.items():
            if ws.state is not None:
                self.settings.set_workspace_state(name, ws.state)
        self.settings.set_workspace(self.current)

