"""Graph > Check Compile (issue 16): the check runs in a child process and its graph break shows in
Problems on the node that breaks; a click there selects that node; an edit clears it."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QProcess, Qt
from PySide6.QtTest import QTest

from graph_editor.model import save_graph
from tests.graph_editor.compile_graphs import item_graph

from .helpers import open_template, settle

pytestmark = pytest.mark.qt


@pytest.mark.slow
def test_check_compile_puts_the_break_on_its_node(window, qtbot, tmp_path):
    path = tmp_path / "item.graph.json"
    save_graph(item_graph(), path)
    assert window.files.open(path)
    settle(window)
    assert window.problems.count() == 0
    with qtbot.waitSignal(window.compile_check.done, timeout=300_000) as blocker:
        QTest.keyClick(window, Qt.Key.Key_F7, Qt.KeyboardModifier.ShiftModifier)  # Graph > Check Compile
        assert window.compile_check.running
    result = blocker.args[0]
    assert result is not None and result.break_count >= 1
    # the outcome where the user looks, not only in the Log tab behind Problems
    assert window.statusBar().currentMessage().startswith(f"Check Compile: {result.graph_count} graph(s), "
                                                          f"{result.break_count} graph break(s)")
    items = [window.problems.list.item(i) for i in range(window.problems.count())]
    (item,) = [i for i in items if "graph break" in i.text()]
    assert item.text().startswith("scale: torch.compile graph break: Unsupported Tensor.item()")
    rect = window.problems.list.visualItemRect(item)
    QTest.mouseClick(window.problems.list.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert window.controller.selection == ["scale"]
    window.grab().save(str(tmp_path / "compile_check.png"))
    window.controller.set_param("fc", "bias", False)  # any edit: the check it showed is stale
    settle(window)
    assert not [i for i in range(window.problems.count()) if "graph break" in window.problems.list.item(i).text()]


def test_closing_the_window_ends_a_running_check(window, qtbot):
    open_template(window, "lenet5")
    QTest.keyClick(window, Qt.Key.Key_F7, Qt.KeyboardModifier.ShiftModifier)
    proc = window.compile_check.proc
    assert proc is not None and proc.waitForStarted(30_000)
    window.document.undo_stack.setClean()
    window.close()
    assert window.compile_check.proc is None and proc.state() == QProcess.ProcessState.NotRunning
