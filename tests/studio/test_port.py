"""Features plug into the window through the narrow port (issue 12): one action table that refuses
a second key or a taken shortcut, one Train action (menu, toolbar, Ctrl+T, the dashboard's hint),
and no import cycle in the studio package (TYPE_CHECKING and lazy imports included)."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QAction
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QToolButton

from tests.import_graph import cycles, import_graph

pytestmark = pytest.mark.qt
ROOT = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------- the import graph
@functools.cache
def studio_imports() -> dict[str, set[str]]:
    return import_graph(ROOT, "studio")


def test_the_studio_package_has_no_import_cycle():
    graph = studio_imports()
    assert len(graph) > 40 and "studio.training" in graph["studio.app"]
    assert cycles(graph) == []


def test_only_the_composition_root_knows_the_main_window():
    graph = studio_imports()
    assert sorted(m for m, edges in graph.items() if "studio.main_window" in edges) == ["studio.app"]


def installed_features() -> list[str]:
    """The modules whose ``install`` the composition root imports: each a feature of the window."""
    import ast

    tree = ast.parse((ROOT / "studio" / "app.py").read_text(encoding="utf-8"))
    return sorted(node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level == 1
                  and node.module and any(a.name == "install" for a in node.names))


def test_every_feature_is_a_package_that_the_composition_root_installs():
    """One shape for every feature: ``studio/<feature>/`` whose ``install(port)`` the root calls (a
    single-file feature, as ``studio/finetune.py`` was, fails)."""
    import importlib

    features = installed_features()
    assert {"training", "export", "inspect", "compile_check", "experiments", "finetune"} <= set(features)
    for name in features:
        package = importlib.import_module(f"studio.{name}")
        assert hasattr(package, "__path__") and callable(package.install), f"studio.{name} is not a package"


def test_the_training_session_feeds_widgets_through_their_methods():
    """No reaching into a widget's parts (a plot's PlotItem, the confusion panel's gallery), and the
    peak predictor comes from a module without widgets."""
    source = (ROOT / "studio" / "training" / "session.py").read_text(encoding="utf-8")
    assert "getPlotItem" not in source and ".gallery" not in source and ".plots[" not in source
    assert "studio.training.memory_bar" not in studio_imports()["studio.training.session"]
    assert "PySide6" not in (ROOT / "studio" / "training" / "memory_prediction.py").read_text(encoding="utf-8")


def test_the_port_hands_out_no_window(window):
    from PySide6.QtWidgets import QMainWindow

    from studio.app import port_of

    port = port_of(window)
    assert not any(isinstance(getattr(port, name, None), QMainWindow) for name in vars(port) if not name.startswith("_"))
    assert not hasattr(port, "host")
    port.status("recording", 0)
    assert port.status_text() == "recording"
    port.clear_status()
    assert port.status_text() == ""


def test_the_cycle_check_finds_a_type_checking_cycle(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "window.py").write_text("from .sub.hook import Hook\n")
    (pkg / "sub" / "hook.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                         "    from ..window import Window\n")
    (pkg / "lazy.py").write_text("def f():\n    from pkg import window\n")
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.lazy"] == {"pkg.window"}
    assert cycles(graph) == [["pkg.sub.hook", "pkg.window"]]


# ---------------------------------------------------------------------- the port
def ctrl_t_actions(window) -> list[QAction]:
    return [a for a in window.findChildren(QAction) if "Ctrl+T" in [k.toString() for k in a.shortcuts()]]


def close_train_dialogs(window) -> None:
    """Cancel the Train dialogs once their dataset preview (a thread) has been read: a thread must
    not outlive the window the test closes."""
    from studio.training.train_dialog import TrainDialog

    for dialog in window.findChildren(TrainDialog):
        assert dialog.wait_preview(60_000)
        dialog.reject()


@pytest.mark.slow
def test_one_train_action_from_menu_toolbar_shortcut_and_hint(window, qtbot):
    from studio.training.train_dialog import TrainDialog

    train = window.action["train"]             # in the one action table, beside the window's own rows
    assert ctrl_t_actions(window) == [train] and train is window.training.train_action
    assert train in window.menus["&Run"].actions() and train in window.toolbar.actions()
    assert [a.text() for a in window.menuBar().actions()] == ["&File", "&Edit", "&Graph", "&Run", "E&xport", "&View"]
    window.activateWindow()
    QTest.keyClick(window, Qt.Key.Key_T, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: any(d.isVisible() for d in window.findChildren(TrainDialog)), timeout=60_000)
    dialog = next(d for d in window.findChildren(TrainDialog) if d.isVisible())
    close_train_dialogs(window)
    ctl = window.training.controller()
    assert ctl.dashboard.title.text() == "No run yet: Train (Ctrl+T) starts one"
    window.workspaces.show("Train")            # the training side built and docked: still one Ctrl+T
    assert ctrl_t_actions(window) == [train]
    window.workspaces.show("Design")
    button = window.toolbar.widgetForAction(train)
    assert isinstance(button, QToolButton) and "(Ctrl+T)" in button.toolTip()
    QTest.mouseClick(button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: any(d.isVisible() for d in window.findChildren(TrainDialog) if d is not dialog),
                    timeout=60_000)
    close_train_dialogs(window)


def test_the_action_table_refuses_a_second_key_or_a_taken_shortcut(window):
    from studio.actions import ActionSpec
    from studio.app import port_of

    port = port_of(window)
    calls: list[str] = []
    with pytest.raises(ValueError, match="'train'.*has one already"):
        port.add_action(ActionSpec("train", "Train again", "&Run", "Ctrl+Alt+T"), lambda: None)
    with pytest.raises(ValueError, match="Ctrl\\+T is taken by action_train"):
        port.add_action(ActionSpec("retrain", "Retrain", "&Run", "Ctrl+T"), lambda: None)
    with pytest.raises(ValueError, match="Shift\\+F7 is taken by action_check_compile"):
        port.add_action(ActionSpec("explain", "Explain", "&Graph", "Shift+F7"), lambda: None)
    assert "retrain" not in window.action and not [a for a in window.findChildren(QAction) if a.text() == "Retrain"]
    action = port.add_action(ActionSpec("sketch", "&Sketch", "&Tools", "Ctrl+Alt+K", "new", True, "Sketch"),
                             lambda: calls.append("sketch"))
    bar = window.menuBar().actions()
    assert bar.index(window.menus["&Tools"].menuAction()) == bar.index(window.menus["&View"].menuAction()) - 1
    assert window.action["sketch"] is action and action.objectName() == "action_sketch"
    assert window.toolbar.actions()[-1] is action and window.toolbar.actions()[-2].isSeparator()
    QTest.mouseClick(window.toolbar.widgetForAction(action), Qt.MouseButton.LeftButton)
    assert calls == ["sketch"]
    before = action.icon().cacheKey()
    window.theme_actions["light" if window.s.themes.current.name == "dark" else "dark"].trigger()
    assert action.icon().cacheKey() != before   # repainted in the new theme's colours


def test_the_port_tells_the_window(window):
    from studio.app import port_of

    port = port_of(window)
    port.log("hello from a feature", "warning")
    assert any("hello from a feature" in line for line in window.log.lines())
    port.status("a status line")
    assert window.statusBar().currentMessage() == "a status line"
    assert port.graph is window.controller.graph and port.document_name == window.document.name
    node = next(iter(window.controller.graph.nodes))
    port.reveal(node)
    assert window.controller.selection == [node]


def test_the_port_docks_side_by_side(window, qtbot):
    from PySide6.QtWidgets import QDockWidget, QLabel

    from studio.app import port_of

    window.resize(1440, 900)
    port = port_of(window)
    docks = [QDockWidget(title, window, objectName=f"{title}Dock") for title in ("Wide", "Narrow")]
    for dock in docks:
        dock.setWidget(QLabel(dock.windowTitle()))

    def build() -> list[QDockWidget]:   # as the Inspect workspace builds its docks on first entry
        port.add_docks(docks, widths=(0.7, 0.3), height=0.4)
        return docks

    port.workspaces.add("Sketch", docks=build, canvas=True)
    port.workspaces.show("Sketch")
    qtbot.waitUntil(lambda: all(d.isVisible() for d in docks))
    wide, narrow = docks
    assert {window.dockWidgetArea(d) for d in docks} == {Qt.DockWidgetArea.BottomDockWidgetArea}
    assert wide.geometry().right() < narrow.geometry().left()        # side by side, the wide one first
    assert wide.width() > 1.5 * narrow.width()
    assert abs(wide.height() - 0.4 * window.height()) < 0.1 * window.height()
