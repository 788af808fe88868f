"""Small graphs that use every registered layer type on its example input.

Each builder registers an :class:`~graph_editor.build.modules.Example` (an input the layer accepts
and parameters to try). These graphs put every type into a classifier, so that whatever proves
one layer type (build, shape inference, FLOPs, import, source, ONNX) proves all of them, and a
newly registered type is proven without anyone listing it.
"""

from __future__ import annotations

import math

from ..model import Graph, InputSpec, all_layers
from .modules import NO_MODULE, Example, get_example


def examples() -> dict[str, Example]:
    """Layer type -> its example, for every catalog type that has a module."""
    out: dict[str, Example] = {}
    for spec in all_layers():
        if spec.type in NO_MODULE:
            continue
        example = get_example(spec.type)
        if example is None:
            raise LookupError(f"layer type {spec.type!r} registers no example input in graph_editor.build.ops")
        out[spec.type] = example
    return out


def example_graph(type_: str, num_classes: int = 3) -> Graph:
    """Input (the example's shape) -> the layer -> Flatten -> Linear -> Output. The layer's node id
    is ``layer``; a variadic input gets its extra wires through Identity copies of the input."""
    example = examples()[type_]
    g = Graph(InputSpec(example.shape, example.dtype), num_classes, {"name": f"{type_} example"})
    g.add_node("Input", "input")
    _add_layer(g, type_, "layer", "input", example)
    g.chain(("Flatten", "flatten"), ("Linear", "head", {"out_features": num_classes}), ("Output", "output"),
            start="layer")
    return g


def catalog_graph(num_classes: int = 3, features: int = 8) -> Graph:
    """One classifier that uses every layer type whose example takes float input: the ``features``
    inputs are mapped to each example shape once (Linear, Reshape), each type is applied to its
    shape and flattened, and one Linear head reads them all concatenated. Types whose example reads
    category codes get :func:`example_graph` instead (see :func:`code_types`)."""
    g = Graph(InputSpec((features,)), num_classes, {"name": "catalog"})
    g.add_node("Input", "input")
    sources: dict[tuple[int, ...], str] = {}
    flats: list[str] = []
    skipped = set(code_types())
    for type_, example in examples().items():
        if type_ in skipped:
            continue
        src = sources.get(example.shape)
        if src is None:
            src = f"in{len(sources)}"
            g.add_node("Linear", src, {"out_features": math.prod(example.shape)})
            g.connect("input", src)
            if len(example.shape) > 1:
                g.add_node("Reshape", f"{src}_shape", {"shape": list(example.shape)})
                g.connect(src, f"{src}_shape")
                src = f"{src}_shape"
            sources[example.shape] = src
        base = type_.lower()
        _add_layer(g, type_, base, src, example)
        g.chain(("Flatten", f"{base}_flat"), start=base)
        flats.append(f"{base}_flat")
    g.add_node("Concat", "features", {"dim": 1})
    for flat in flats:
        g.connect(flat, "features")
    g.chain(("Linear", "head", {"out_features": num_classes}), ("Output", "output"), start="features")
    return g


def code_types() -> list[str]:
    """The layer types whose example reads integer category codes (not in :func:`catalog_graph`)."""
    return [t for t, e in examples().items() if e.codes_below is not None or e.dtype != "float32"]


def _add_layer(g: Graph, type_: str, node_id: str, src: str, example: Example) -> None:
    g.add_node(type_, node_id, dict(example.params))
    spec = g.nodes[node_id].spec
    port = spec.inputs[0] if spec is not None and spec.inputs else None
    wires = port.min_count if port is not None and port.variadic else 1
    g.connect(src, node_id)
    for i in range(1, wires):  # one wire per pair of ports: the same tensor again through a copy
        g.add_node("Identity", f"{node_id}_copy{i}")
        g.connect(src, f"{node_id}_copy{i}")
        g.connect(f"{node_id}_copy{i}", node_id)
