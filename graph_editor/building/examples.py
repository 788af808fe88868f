"""Small graphs that use every registered layer type on its example input.

Each builder registers an :class:`~graph_editor.building.modules.Example` (an input the layer accepts
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
            raise LookupError(f"layer type {spec.type!r} registers no example input in graph_editor.building.ops")
        out[spec.type] = example
    return out


def example_graph(type_: str, num_classes: int = 3) -> Graph:
    """Input (the example's shape) -> the layer -> Flatten -> Linear -> Output. The layer's node id
    is ``layer``; a variadic input gets its extra wires through Identity copies of the input."""
    example = get_example(type_)
    if example is None:
        raise LookupError(f"layer type {type_!r} registers no example input in graph_editor.building.ops")
    g = Graph(InputSpec(example.shape, example.dtype), num_classes, {"name": f"{type_} example"})
    g.add_node("Input", "input")
    last = _add_layer(g, type_, "layer", "input", example)
    g.chain(("Flatten", "flatten"), ("Linear", "head", {"out_features": num_classes}), ("Output", "output"),
            start=last)
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
        last = _add_layer(g, type_, base, src, example)
        g.chain(("Flatten", f"{base}_flat"), start=last)
        flats.append(f"{base}_flat")
    g.add_node("Concat", "features", {"dim": 1})
    for flat in flats:
        g.connect(flat, "features")
    g.chain(("Linear", "head", {"out_features": num_classes}), ("Output", "output"), start="features")
    return g


def code_types() -> list[str]:
    """The layer types whose example reads integer category codes (not in :func:`catalog_graph`)."""
    return [t for t, e in examples().items() if e.codes_below is not None or e.dtype != "float32"]


def _add_layer(g: Graph, type_: str, node_id: str, src: str, example: Example) -> str:
    """Add the layer fed from ``src`` and return the node to read its result from: the layer, or
    what joins it to the batch (a layer without inputs) or joins all its outputs (a Split)."""
    g.add_node(type_, node_id, dict(example.params))
    spec = g.nodes[node_id].spec
    assert spec is not None
    for port in spec.inputs:
        wires = port.min_count if port.variadic else 1
        g.connect(src, node_id, dst_port=port.name)
        for _ in range(1, wires):  # one wire per pair of ports: the same tensor again through a copy
            copy = g.new_id(f"{node_id}_copy")
            g.add_node("Identity", copy)
            g.connect(src, copy)
            g.connect(copy, node_id, dst_port=port.name)
    if not spec.inputs:  # a learnable tensor of batch 1: added to the input, it broadcasts over the batch
        g.add_node("Add", f"{node_id}_plus_input")
        g.connect(src, f"{node_id}_plus_input")
        g.connect(node_id, f"{node_id}_plus_input")
        return f"{node_id}_plus_input"
    outputs = spec.outputs_for(g.nodes[node_id].params)
    if len(outputs) == 1:
        return node_id
    g.add_node("Concat", f"{node_id}_outputs", {"dim": 1})  # every output used, each through its own port
    for port_name in outputs:
        flat = f"{node_id}_{port_name}_flat"
        g.add_node("Flatten", flat)
        g.connect(node_id, flat, src_port=port_name)
        g.connect(flat, f"{node_id}_outputs")
    return f"{node_id}_outputs"
