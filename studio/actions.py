"""Every command of the main window in ONE table; menus and the toolbar are built from it.

A row names the command (its key), the menu it lives in, its shortcut, icon and tip. The
window supplies one handler per key; :func:`build_actions` refuses a table row without a
handler, so a command cannot be listed and do nothing. A feature adds its own rows to the same
table through the window's port (:meth:`studio.port.StudioPort.add_action`), which refuses a key
or a shortcut the window has already.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMenu, QMenuBar, QToolBar, QWidget

from .resources import IconSet

Key = QKeySequence.StandardKey
Shortcut = QKeySequence.StandardKey | str | tuple[QKeySequence.StandardKey | str, ...] | None


@dataclass(frozen=True)
class ActionSpec:
    key: str
    text: str
    menu: str
    shortcut: Shortcut = None
    icon: str = ""
    toolbar: bool = False
    tip: str = ""
    separator: bool = False  # a separator before it in its menu


ACTIONS: tuple[ActionSpec, ...] = (
    ActionSpec("new", "&New", "&File", Key.New, "new", True, "Start a new graph with an Input and an Output"),
    ActionSpec("new_template", "New from &Template…", "&File", "Ctrl+Shift+N", "template", True,
               "Start from a classic network (MLP, LeNet-5, ResNet-18, …)"),
    ActionSpec("open", "&Open…", "&File", Key.Open, "open", True, "Open a *.graph.json file"),
    ActionSpec("save", "&Save", "&File", Key.Save, "save", True, "Save the graph", separator=True),
    ActionSpec("save_as", "Save &As…", "&File", Key.SaveAs, "save_as", False, "Save the graph to a new file"),
    ActionSpec("import_module", "&Import Module…", "&File", "Ctrl+I", "import", False,
               "Import an nn.Module from a module:factory through torch.fx", separator=True),
    ActionSpec("quit", "&Quit", "&File", Key.Quit, "", False, "Close Torch Studio", separator=True),
    ActionSpec("undo", "&Undo", "&Edit", Key.Undo, "undo", True, "Undo the last edit", separator=True),
    ActionSpec("redo", "&Redo", "&Edit", (Key.Redo, "Ctrl+Y"), "redo", True, "Redo the edit undone last"),
    ActionSpec("cut", "Cu&t", "&Edit", Key.Cut, "cut", False, "Cut the selected nodes", separator=True),
    ActionSpec("copy", "&Copy", "&Edit", Key.Copy, "copy", False, "Copy the selected nodes (as JSON)"),
    ActionSpec("paste", "&Paste", "&Edit", Key.Paste, "paste", False, "Paste copied nodes"),
    ActionSpec("duplicate", "D&uplicate", "&Edit", "Ctrl+D", "duplicate", False, "Duplicate the selected nodes"),
    ActionSpec("delete", "&Delete", "&Edit", Key.Delete, "delete", True, "Delete the selected nodes"),
    ActionSpec("select_all", "Select &All", "&Edit", Key.SelectAll, "select_all", False, "Select every node",
               separator=True),
    ActionSpec("auto_layout", "&Auto-layout", "&Graph", "Ctrl+L", "auto_layout", True,
               "Lay the nodes out left to right"),
    ActionSpec("fit_view", "&Fit View", "&Graph", "Ctrl+0", "fit_view", True, "Fit the whole graph in view"),
    ActionSpec("save_block", "Save Selection as &Block…", "&Graph", "Ctrl+B", "block", False,
               "Keep the selected layers in the palette's My blocks, to drag into any graph"),
    ActionSpec("validate", "&Validate", "&Graph", "F7", "validate", True, "Check the graph now and list its problems",
               separator=True),
)

MENUS = ("&File", "&Edit", "&Graph", "&View")


def build_actions(parent: QWidget, handlers: Mapping[str, Callable[[], object]], icons: IconSet,
                  specs: tuple[ActionSpec, ...] = ACTIONS) -> dict[str, QAction]:
    """One QAction per table row, triggering its handler; a row without a handler is an error."""
    missing = [s.key for s in specs if s.key not in handlers]
    if missing:
        raise KeyError(f"no handler for action(s) {', '.join(missing)}")
    return {spec.key: make_action(spec, handlers[spec.key], parent, icons) for spec in specs}


def make_action(spec: ActionSpec, handler: Callable[[], object], parent: QWidget, icons: IconSet) -> QAction:
    """The QAction of one table row: its text, ``action_<key>`` name, shortcut(s), icon and tip,
    triggering ``handler``."""
    action = QAction(spec.text, parent)
    action.setObjectName(f"action_{spec.key}")
    if isinstance(spec.shortcut, tuple):  # several: the platform's own, then the common alternative
        keys: list[QKeySequence] = []
        for key in spec.shortcut:
            for seq in (QKeySequence.keyBindings(key) if isinstance(key, Key) else [QKeySequence(key)]):
                if seq.toString() not in [k.toString() for k in keys]:
                    keys.append(seq)
        action.setShortcuts(keys)
    elif spec.shortcut is not None:
        action.setShortcut(QKeySequence(spec.shortcut))
    if spec.icon:
        action.setIcon(icons.icon(spec.icon))
    native = action.shortcut().toString(QKeySequence.SequenceFormat.NativeText)
    action.setToolTip(f"{spec.tip} ({native})" if native else spec.tip)
    action.setStatusTip(spec.tip)
    action.triggered.connect(lambda _checked=False, h=handler: h())
    return action


def build_menus(menubar: QMenuBar, actions: Mapping[str, QAction], specs: tuple[ActionSpec, ...] = ACTIONS,
                recent: QMenu | None = None) -> dict[str, QMenu]:
    """The menu bar from the table; ``recent`` (Open Recent) goes after Open."""
    menus = {name: menubar.addMenu(name) for name in MENUS}
    for spec in specs:
        menu = menus[spec.menu]
        if spec.separator and menu.actions():
            menu.addSeparator()
        menu.addAction(actions[spec.key])
        if spec.key == "open" and recent is not None:
            menu.addMenu(recent)
    return menus


def build_toolbar(toolbar: QToolBar, actions: Mapping[str, QAction], specs: tuple[ActionSpec, ...] = ACTIONS) -> None:
    """The toolbar: the rows marked ``toolbar``, a separator between menus."""
    last_menu = None
    for spec in specs:
        if not spec.toolbar:
            continue
        if last_menu is not None and spec.menu != last_menu:
            toolbar.addSeparator()
        toolbar.addAction(actions[spec.key])
        last_menu = spec.menu


def refresh_icons(actions: Mapping[str, QAction], icons: IconSet, specs: tuple[ActionSpec, ...] = ACTIONS) -> None:
    """Repaint the icons after a theme change (they take the theme's text colour)."""
    for spec in specs:
        if spec.icon:
            actions[spec.key].setIcon(icons.icon(spec.icon))
