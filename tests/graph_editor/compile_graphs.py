"""A graph whose Module node breaks torch.compile's graph with a deliberate ``.item()``."""

from __future__ import annotations

from graph_editor.model import Graph, InputSpec


def item_graph() -> Graph:
    """digits-sized: Input 1x8x8 -> conv -> scale (Module node: ItemScale, reads .item()) -> ... -> 10 classes."""
    g = Graph(InputSpec((1, 8, 8)), 10, {"name": "item break"})
    g.chain(("Input", "input"),
            ("Conv2d", "conv", {"out_channels": 4, "kernel_size": [3, 3], "padding": [1, 1]}),
            ("Module", "scale", {"cls": "tests.graph_editor.module_node_models:ItemScale", "kwargs": "{}",
                                 "in_shape": [4, 8, 8], "out_shape": [4, 8, 8]}),
            ("ReLU", "relu"), ("Flatten", "flat"), ("Linear", "fc", {"out_features": 10}), ("Output", "output"))
    return g
