"""The analysis runs off the GUI thread: what the window shows before and after it arrives."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from studio.resources import TEMPLATES


def type_into(field, text: str) -> None:
    line = field.lineEdit()
    line.selectAll()
    QTest.keyClicks(line, text)
    QTest.keyClick(line, Qt.Key.Key_Return)


def test_an_opened_graph_shows_its_own_rows_before_its_analysis_arrives(window, qtbot):
    """The summary kept the previous graph's rows until the background analysis of the new one came."""
    seen: list[list[str]] = []
    window.live.inferred.connect(lambda _inf: seen.append([r.id for r in window.summary.model.rows]))
    with qtbot.waitSignal(window.live.analyzed, timeout=30000):
        assert window.files.open(TEMPLATES / "lenet5.graph.json")
    assert seen and set(seen[0]) == set(window.controller.graph.nodes)   # lenet5's, not the starter graph's
    rows = {r.id: r for r in window.summary.model.rows}
    assert rows["conv1"].params == 6 * 5 * 5 + 6


def test_the_problems_panel_follows_an_inspector_edit_through_the_background_build(window, qtbot):
    """A size only the build measures (a billion parameters: a warning from the build on meta) appears
    in Problems after a typed edit, and goes with the next one."""
    with qtbot.waitSignal(window.live.analyzed, timeout=30000):
        assert window.files.open(TEMPLATES / "lenet5.graph.json")
    window.controller.select(["fc1"])
    field = window.inspector.editors["out_features"].field
    with qtbot.waitSignal(window.live.analyzed, timeout=30000):
        type_into(field, "3000000")                     # 400 x 3,000,000: 1.2 billion parameters
    texts = [window.problems.list.item(i).text() for i in range(window.problems.count())]
    assert any("billion parameters" in t for t in texts), texts
    with qtbot.waitSignal(window.live.analyzed, timeout=30000):
        type_into(field, "120")
    assert window.problems.count() == 0
    assert {r.id: r for r in window.summary.model.rows}["fc1"].params == 400 * 120 + 120
