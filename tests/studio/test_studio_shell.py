"""The shell's frame: the action table, menus, themes and settings, and a start-up free of torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence, QPalette
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QMenu

from studio.actions import ACTIONS, build_actions
from studio.resources import ICONS, IconSet
from studio.settings import StudioSettings

pytestmark = pytest.mark.qt
ROOT = Path(__file__).resolve().parents[2]
REQUIRED = {"new", "new_template", "open", "save", "save_as", "undo", "redo", "cut", "copy", "paste",
            "duplicate", "delete", "select_all", "auto_layout", "fit_view", "validate", "import_module"}


def test_the_action_table_has_every_command_with_an_icon_file_and_unique_shortcuts(qapp):   # QKeySequence needs one
    keys = [a.key for a in ACTIONS]
    assert set(keys) >= REQUIRED and len(keys) == len(set(keys))
    for spec in ACTIONS:
        if spec.icon:
            assert (ICONS / f"{spec.icon}.svg").is_file(), spec.icon
    shortcuts = [k for a in ACTIONS if a.shortcut is not None   # an action's alternatives may coincide
                 for k in {QKeySequence(s).toString() for s in (a.shortcut if isinstance(a.shortcut, tuple)
                                                                 else (a.shortcut,))}]
    assert len(shortcuts) == len(set(shortcuts))


def test_a_table_row_without_a_handler_is_refused(qtbot):
    from PySide6.QtWidgets import QWidget

    parent = QWidget()
    qtbot.addWidget(parent)
    with pytest.raises(KeyError, match="no handler for action"):
        build_actions(parent, {"new": lambda: None}, IconSet())


def test_menus_and_toolbar_come_from_the_table_with_the_usual_shortcuts(window):
    in_menus = {a.objectName() for m in window.menuBar().findChildren(QMenu) for a in m.actions()}
    assert {f"action_{k}" for k in REQUIRED} <= in_menus
    assert window.action["save"].shortcut() == QKeySequence(QKeySequence.StandardKey.Save)
    assert window.action["undo"].shortcut() == QKeySequence(QKeySequence.StandardKey.Undo)
    assert window.action["duplicate"].shortcut().toString() == "Ctrl+D"
    assert window.toolbar.actions()  # built from the rows marked for the toolbar
    assert not window.action["undo"].isEnabled()
    window.controller.add_node("ReLU", (0.0, 0.0))
    assert window.action["undo"].isEnabled()
    assert window.action["undo"].text() == "&Undo Add ReLU"


@pytest.mark.slow
def test_theme_switch_changes_the_palette_and_is_remembered(window, tmp_path):
    dark = window.palette().color(QPalette.ColorRole.Window).lightness()
    window.theme_actions["light"].trigger()
    assert window.palette().color(QPalette.ColorRole.Window).lightness() > dark
    assert window.canvas.graph_scene.theme.name == "light"
    assert StudioSettings.at(tmp_path / "settings.ini").theme() == "light"
    window.theme_actions["dark"].trigger()
    assert window.canvas.graph_scene.theme.name == "dark"


def test_window_layout_and_recent_files_persist(make_window, tmp_path):
    first = make_window()
    first.docks["log"].hide()
    first.resize(640, 480)
    first.document.undo_stack.setClean()
    assert first.close()
    second = make_window()
    assert not second.docks["log"].isVisible()
    assert (second.width(), second.height()) == (640, 480)
    settings = StudioSettings.at(tmp_path / "settings.ini")
    for i in range(12):
        settings.add_recent(tmp_path / f"g{i}.graph.json")
    assert len(settings.recent_files()) == 10 and settings.recent_files()[0].endswith("g11.graph.json")


@pytest.mark.slow
def test_the_studio_reopens_in_the_workspace_it_closed_in_with_its_layout(make_window, qtbot):
    first = make_window()
    first.training.show_runs()                         # the Runs workspace builds the training docks
    runs_dock = first.training.controller().runs_dock
    assert first.workspaces.current == "Runs" and runs_dock.isVisible()
    first.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, runs_dock)   # the user moves it
    first.document.undo_stack.setClean()
    assert first.close()
    # The next start goes back there by itself: imported on a thread, then built and shown.
    second = make_window()
    assert not second.training.built and second.workspaces.current == "Design"
    assert second.training.reopen_docks(second.s.settings.workspace()) is not None
    qtbot.waitUntil(lambda: second.workspaces.current == "Runs", timeout=60_000)
    ctl = second.training.controller()
    assert second.dockWidgetArea(ctl.runs_dock) == Qt.DockWidgetArea.RightDockWidgetArea
    assert ctl.runs_dock.isVisible() and not ctl.dashboard_dock.isVisible() and not second.canvas.isVisible()
    second.workspaces.show("Design")                   # closed in Design: the next start stays there
    second.document.undo_stack.setClean()
    assert second.close()
    third = make_window()
    assert third.training.reopen_docks(third.s.settings.workspace()) is None and not third.training.built
    third.training.show_runs()                         # asked for: back at its place
    assert third.dockWidgetArea(third.training.controller().runs_dock) == Qt.DockWidgetArea.RightDockWidgetArea


@pytest.mark.process
def test_starting_the_studio_imports_no_torch():
    code = ("import sys; import studio.app, studio.cli; "
            "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.process
def test_the_studio_opens_reports_and_quits_from_the_command_line(tmp_path):
    env = {"QT_QPA_PLATFORM": "offscreen", "TORCH_STUDIO_REPORT_STARTUP": "1", "HOME": str(tmp_path),
           "XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_DATA_HOME": str(tmp_path / "data"),
           "PATH": "/usr/bin:/bin"}
    graph = ROOT / "assets" / "templates" / "lenet5.graph.json"
    out = subprocess.run([sys.executable, "-m", "studio", str(graph)], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert '"event": "shown"' in lines[0] and '"torch_imported": false' in lines[0]
    assert '"event": "opened"' in lines[1] and '"ok": true' in lines[1] and '"nodes": 14' in lines[1]


@pytest.mark.slow
def test_the_run_menu_builds_training_on_first_use_and_opens_a_runs_graph(window, prompts):
    assert not window.training.built  # nothing of the training side is loaded at start-up
    titles = [a.text() for a in window.menuBar().actions()]
    assert titles == ["&File", "&Edit", "&Graph", "&Run", "E&xport", "&View"]
    window.training.runs_action.trigger()
    assert window.training.built
    assert window.training.controller().runs_dock.isVisible() and window.workspaces.current == "Runs"
    data = json.loads((ROOT / "assets" / "templates" / "lenet5.graph.json").read_text())
    assert window.files.open_snapshot(data, "run 7")
    assert window.windowTitle().startswith("run 7")
    assert len(window.controller.graph) == 14
    assert window.close()  # no run going: the training side lets the window close


@pytest.mark.process
def test_the_background_warm_up_imports_the_analysis_off_the_main_thread():
    code = ("import sys, threading; from studio.warmup import warm_up; before = 'torch' in sys.modules; "
            "t = warm_up(); t.join(120); "
            "print(before, t.name != threading.main_thread().name, 'graph_editor.analysis' in sys.modules, "
            "'torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    # nor the compiler: the Program node's deserialiser loads dynamo, which took 45% of the warm-up
    assert out.stdout.split() == ["False", "True", "True", "False"]


def test_ctrl_y_redoes_as_well(window):
    window.activateWindow()
    window.controller.add_node("ReLU", (0.0, 0.0))
    window.action["undo"].trigger()
    assert len(window.controller.graph) == 2
    window.canvas.setFocus()
    QTest.keyClick(window.canvas.viewport(), Qt.Key.Key_Y, Qt.KeyboardModifier.ControlModifier)
    assert len(window.controller.graph) == 3
    assert "Ctrl+Y" in [k.toString() for k in window.action["redo"].shortcuts()]
