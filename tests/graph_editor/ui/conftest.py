"""Fixtures for the canvas tests: small real graphs, an editor on a real QUndoStack and a shown canvas."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPointF
from PySide6.QtGui import QUndoStack

from graph_editor.model import Graph, InputSpec
from graph_editor.ui.canvas import GraphCanvas
from graph_editor.ui.controller import EditorController
from graph_editor.ui.live import LiveAnalysis


def lenet() -> Graph:
    """A LeNet-style net on 1x28x28 digits: conv, pool, flatten, two linears."""
    g = Graph(InputSpec((1, 28, 28)), num_classes=10)
    g.chain(("Input", "input1"),
            ("Conv2d", "conv1", {"out_channels": 6, "kernel_size": 5, "padding": 2}),
            ("ReLU", "relu1"),
            ("MaxPool2d", "pool1", {"kernel_size": 2}),
            ("Flatten", "flat1"),
            ("Linear", "fc1", {"out_features": 84}),
            ("ReLU", "relu2"),
            ("Linear", "fc2", {"out_features": 10}),
            ("Output", "output1"))
    return g


@pytest.fixture
def graph() -> Graph:
    return lenet()


@pytest.fixture
def editor(qtbot, graph) -> EditorController:
    stack = QUndoStack()
    controller = EditorController(graph, stack)
    return controller


@pytest.fixture
def canvas(editor, qtbot) -> GraphCanvas:
    live = LiveAnalysis(editor, analyze=False)
    view = GraphCanvas(editor, live)
    qtbot.addWidget(view)
    view.resize(1000, 600)
    view.show()
    qtbot.waitExposed(view)
    live.refresh()
    view.centerOn(QPointF(700, 60))  # the lenet fixture is a row of nodes 180 apart at y=0
    return view
