"""The studio as a new user found it by real clicks (issue 22): each test drives the real window with
real events and fails on the defect it names."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from studio.resources import TEMPLATES

pytestmark = pytest.mark.qt


@pytest.mark.parametrize("name", ["resnet18", "vit_tiny"])
def test_a_graph_opened_with_ctrl_o_is_fitted_whole_in_the_canvas(window, prompts, name):
    window.resize(1440, 900)
    QApplication.processEvents()
    prompts.answer("open_path", str(TEMPLATES / f"{name}.graph.json"))
    window.activateWindow()
    QTest.keyClick(window, Qt.Key.Key_O, Qt.KeyboardModifier.ControlModifier)
    QApplication.processEvents()
    shown, whole = window.canvas.visible_rect(), window.canvas.graph_scene.items_rect()
    assert shown.contains(whole), (name, shown, whole)   # fitted, not the first blocks zoomed in
