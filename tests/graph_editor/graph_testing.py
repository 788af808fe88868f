"""Shared helpers for the graph language tests (a plain module: the test files import it by name)."""

from __future__ import annotations

from pathlib import Path

from graph_editor.model import Graph, InputSpec

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "assets" / "templates"


def lenet_graph() -> Graph:
    g = Graph(InputSpec((1, 32, 32)), 10, {"name": "LeNet"})
    g.chain(
        ("Input", "input"),
        ("Conv2d", "conv1", {"out_channels": 6, "kernel_size": 5}), ("ReLU", "relu1"),
        ("MaxPool2d", "pool1", {"kernel_size": 2}),
        ("Conv2d", "conv2", {"out_channels": 16, "kernel_size": 5}), ("ReLU", "relu2"),
        ("MaxPool2d", "pool2", {"kernel_size": 2}),
        ("Flatten", "flatten"),
        ("Linear", "fc1", {"out_features": 120}), ("ReLU", "relu3"),
        ("Linear", "fc2", {"out_features": 84}), ("ReLU", "relu4"),
        ("Linear", "fc3", {"out_features": 10}),
        ("Output", "output"),
    )
    return g
