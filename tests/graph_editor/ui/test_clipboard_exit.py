"""Copying nodes must not crash the process when it exits with them on the clipboard."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.process

SCRIPT = """
from PySide6.QtGui import QUndoStack
from PySide6.QtWidgets import QApplication
from graph_editor.model import Graph
from graph_editor.ui.controller import EditorController

app = QApplication([])
g = Graph()
g.chain(("Input", "x"), ("Flatten", "flat"), ("Linear", "fc", {"out_features": 10}), ("Output", "out"))
controller = EditorController(g, QUndoStack())
controller.copy(["flat", "fc"])
print(QApplication.clipboard().text()[:1])
"""


def test_exit_with_copied_nodes_on_the_clipboard_is_clean():
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "{"
