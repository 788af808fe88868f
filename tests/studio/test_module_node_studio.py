"""Module nodes in the studio (issue 16): the Import Module dialog's Strict checkbox (off keeps
unmapped submodules as Module nodes, on asks for today's error), driven by real key and mouse
events; a Module node whose class cannot be imported is named, with its class, in Problems."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from graph_editor.model import save_graph
from studio.dialogs.import_module import ImportModuleDialog
from tests.graph_editor.compile_graphs import item_graph

from .helpers import settle

pytestmark = pytest.mark.qt


def test_strict_is_off_by_default_and_a_click_turns_it_on(qtbot, tmp_path):
    dialog = ImportModuleDialog()
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    QTest.keyClicks(dialog.target, "tests.graph_editor.module_node_models:sine_net")
    QTest.keyClicks(dialog.shape, "3, 8, 8")
    assert dialog.request().strict is False
    QTest.mouseClick(dialog.strict, Qt.MouseButton.LeftButton)
    request = dialog.request()
    assert request.strict is True and request.input_shape == (3, 8, 8)
    dialog.grab().save(str(tmp_path / "import_dialog.png"))


def test_a_module_node_whose_class_cannot_be_imported_is_named_in_problems(window, tmp_path):
    graph = item_graph()
    graph.nodes["scale"].params["cls"] = "tests.graph_editor.no_such_module:ItemScale"
    path = tmp_path / "missing.graph.json"
    save_graph(graph, path)
    assert window.files.open(path)
    settle(window)
    texts = [window.problems.list.item(i).text() for i in range(window.problems.count())]
    assert any(t.startswith("scale: ") and "cannot import class tests.graph_editor.no_such_module:ItemScale" in t
               for t in texts), texts
