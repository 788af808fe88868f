"""Capturing a graph whose Module node reads the data's values (``.item()``): the Inspect workspace
says which node and why, in its status and in Problems (a click selects the node), not a traceback."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from graph_editor.model import save_graph
from tests.graph_editor.compile_graphs import item_graph

from ..helpers import settle


def test_an_item_read_is_named_on_its_node_in_problems(window, qtbot, tmp_path):
    path = tmp_path / "item.graph.json"
    save_graph(item_graph(), path)
    assert window.files.open(path)
    settle(window)
    button = window.workspaces.bar.widgetForAction(window.workspaces.items["Inspect"].action)
    QTest.mouseClick(button, Qt.MouseButton.LeftButton)
    ws = window.inspect.workspace
    QTest.mouseClick(ws.capture_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: ws.capture_button.isEnabled(), timeout=60_000)
    status = ws.capture_status.text()
    assert status.startswith("Cannot capture: Module node scale (tests.graph_editor.module_node_models:ItemScale) "
                             "calls .item() at module_node_models.py:40"), status
    assert "Traceback" not in status and ws.capture is None
    items = [window.problems.list.item(i) for i in range(window.problems.count())]
    [item] = [i for i in items if "calls .item()" in i.text()]
    assert item.text().startswith("scale: Module node scale")
    rect = window.problems.list.visualItemRect(item)
    QTest.mouseClick(window.problems.list.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert window.controller.selection == ["scale"]
