"""Graphs for the exporter tests: the templates, and small graphs that use every catalog layer."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from graph_editor.building.examples import catalog_graph, code_types, example_graph
from graph_editor.model import Graph, InputSpec, load_graph

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "assets" / "templates"
TEMPLATE_NAMES = ("mlp", "lenet5", "digits_cnn", "resnet18_cifar", "resnet18", "mobilenet_v2", "vgg11", "vit_tiny")


def template(name: str) -> Graph:
    return load_graph(TEMPLATES / f"{name}.graph.json")


def conv_zoo() -> Graph:
    """Branches, merges and every convolution, pooling, normalisation and activation layer."""
    g = Graph(InputSpec((3, 16, 16)), 10, {"name": "conv zoo"})
    g.chain(("Input", "input"), ("Conv2d", "conv1", {"out_channels": 8, "padding": 1}), ("BatchNorm2d", "bn1"),
            ("ReLU", "relu"))
    g.chain(("Conv2d", "conv_a", {"out_channels": 8, "kernel_size": 1}), ("SiLU", "silu"), start="relu")
    g.chain(("Conv2d", "conv_b", {"out_channels": 8, "padding": 1, "groups": 8}), ("Hardswish", "hswish"),
            start="relu")
    g.chain(("Sigmoid", "gate"), start="relu")
    g.add_node("Add", "add")
    g.connect("silu", "add")
    g.connect("hswish", "add")
    g.add_node("Multiply", "mul")
    g.connect("add", "mul")
    g.connect("gate", "mul")
    g.add_node("Concat", "cat")
    g.connect("mul", "cat")
    g.connect("relu", "cat")
    g.chain(("GroupNorm", "gn", {"num_groups": 4}), ("LeakyReLU", "lrelu", {"negative_slope": 0.1}),
            ("Dropout2d", "drop2d", {"p": 0.2}), ("MaxPool2d", "maxpool", {"kernel_size": 2}),
            ("ConvTranspose2d", "up", {"out_channels": 8, "kernel_size": 2, "stride": 2}), ("ReLU6", "relu6"),
            ("AvgPool2d", "avgpool", {"kernel_size": 2}), ("Tanh", "tanh"),
            ("AdaptiveAvgPool2d", "gap", {"output_size": [2, 2]}), ("Flatten", "flatten"),
            ("Linear", "fc1", {"out_features": 24}), ("BatchNorm1d", "bn1d"), ("GELU", "gelu"),
            ("Dropout", "drop", {"p": 0.3}), ("Identity", "same"), ("Reshape", "reshape", {"shape": [4, 6]}),
            ("Conv1d", "conv1d", {"out_channels": 5, "kernel_size": 3, "padding": 1}), ("Flatten", "flatten2"),
            ("Linear", "fc2", {"out_features": 10}), ("LogSoftmax", "logsm"), ("Softmax", "softmax"),
            ("Output", "output"), start="cat")
    g.set_label("fc2", "Classifier Head")
    return g


def sequence_zoo() -> Graph:
    """A tiny vision transformer: patches, class token, attention, encoder, permutes, token select."""
    g = Graph(InputSpec((3, 16, 16)), 5, {"name": "sequence zoo"})
    g.chain(("Input", "input"), ("PatchEmbed", "patch", {"embed_dim": 16, "patch_size": 4}),
            ("ClassTokenPosEmbed", "pos"), ("MultiheadAttention", "attn", {"num_heads": 2}),
            ("TransformerEncoderLayer", "block", {"nhead": 2, "dim_feedforward": 32, "dropout": 0.0}),
            ("LayerNorm", "norm"), ("Permute", "tokens_last", {"dims": [1, 0]}),
            ("Permute", "tokens_first", {"dims": [1, 0]}), ("SelectToken", "cls", {"index": 0}),
            ("Linear", "head", {"out_features": 5}), ("Output", "output"))
    return g


def tabular_zoo() -> Graph:
    """A tabular row whose first two columns are category codes, embedded and joined to the row."""
    g = Graph(InputSpec((6,)), 3, {"name": "tabular zoo"})
    g.chain(("Input", "input"), ("Embedding", "codes", {"num_embeddings": 7, "embedding_dim": 3,
                                                        "columns": [0, 1]}))
    g.chain(("Linear", "dense", {"out_features": 4}), start="input")
    g.add_node("Concat", "join")
    g.connect("codes", "join")
    g.connect("dense", "join")
    g.chain(("ReLU", "act"), ("Linear", "out", {"out_features": 3}), ("Output", "output"), start="join")
    return g


def catalog_zoos() -> dict[str, Callable[[], Graph]]:
    """Generated from the layer registry (each type's example): a layer type added to the catalog is
    exported and proven in every format without an edit here."""
    zoos: dict[str, Callable[[], Graph]] = {"catalog": catalog_graph}
    for type_ in code_types():
        zoos[f"catalog_{type_.lower()}"] = partial(example_graph, type_)
    return zoos


ZOOS = {"conv_zoo": conv_zoo, "sequence_zoo": sequence_zoo, "tabular_zoo": tabular_zoo, **catalog_zoos()}


def tiny_ln_graph() -> Graph:
    """A small MLP with a LayerNorm (an operator ONNX has only from opset 17)."""
    g = Graph(InputSpec((8,)), 3, {"name": "tiny ln"})
    g.chain(("Input", "input"), ("Linear", "fc1", {"out_features": 16}), ("LayerNorm", "ln1"), ("GELU", "act"),
            ("Linear", "fc2", {"out_features": 3}), ("Output", "output"))
    return g


def export_imported_onnx(result: Any, name: str, folder: Path) -> Any:
    """An import's graph built with its weights and exported to ONNX as the one-click export does, without
    the latency timing; its proof on 3 random samples. Returns the export's report."""
    from exporters import ExportOptions, export
    from exporters.source import ExportSource, random_inputs
    from graph_editor.building import build_module

    built = build_module(result.graph)
    built.load_state_dict(result.state_dict, strict=True)
    source = ExportSource(result.graph, built.eval(), random_inputs(result.graph, 3, 0), name, name)
    return export(source, "onnx", folder / f"{name}.onnx", ExportOptions(timing_runs=0))
