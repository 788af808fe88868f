"""Property: any graph, however wired and parametrised, either builds and runs on ``meta`` with the
shapes validation promised, or fails with problems located at its nodes; never anything else."""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import fx
from torch.utils.flop_counter import FlopCounterMode

from graph_editor.analysis import analyze
from graph_editor.building import BuildError, build_module, example_input
from graph_editor.importer import import_module
from graph_editor.model import Edge, Graph, InputSpec, LayerSpec, ParamSpec, all_layers, validate

LAYERS = [s for s in all_layers() if s.type not in ("Input", "Output")]
SHAPES = {"image": [(3, 8, 8), (2, 6, 7), (16, 4, 4)], "sequence": [(4, 10), (6, 16)], "tabular": [(12,)]}


def fits(spec: LayerSpec, shape: tuple[int, ...]) -> bool:
    """The catalog's own rules (ranks, shapes, dtypes) accept a ``spec`` node with its default parameters
    after an input of ``shape``; a variadic input gets two wires."""
    g = Graph(InputSpec(shape), 3)
    g.chain(("Input", "input"), ("Identity", "a"))
    g.add_node("Identity", "b")
    g.add_edge(Edge("input", "b"), check=False)
    g.add_node(spec.type, "n", check=False)
    for port in spec.inputs:
        for src in ("a", "b")[: 2 if port.variadic else 1]:
            g.add_edge(Edge(src, "n", "out", port.name), check=False)
    return not any(p.node == "n" and p.severity == "error" for p in validate(g, 2).problems)


# Input shapes with the layers that suit them (the catalog accepts them on one of the shapes, so that many
# graphs get far), derived from the catalog: a new layer type is fuzzed with no edit here. "any" mixes all.
FAMILIES = {family: (shapes, {s.type for s in LAYERS if any(fits(s, x) for x in shapes)})
            for family, shapes in SHAPES.items()}
FAMILIES["any"] = ([(12,), (4, 10), (3, 8, 8), (2, 6, 7), (16, 4, 4), (6, 16)], {s.type for s in LAYERS})


def test_the_families_come_from_the_catalogs_shape_rules():
    image, sequence, tabular = (FAMILIES[f][1] for f in ("image", "sequence", "tabular"))
    anywhere = image & sequence & tabular
    assert {"ReLU", "Dropout", "Identity", "Add", "Concat", "Flatten", "Reshape", "Linear"} <= anywhere
    assert {"Conv2d", "MaxPool2d", "BatchNorm2d"} <= image - sequence - tabular
    assert {"Conv1d", "SelectToken", "TransformerEncoderLayer"} <= sequence - image - tabular
    assert "Module" not in image | sequence | tabular    # it needs a class named: fuzzed only in "any"


def param_value(spec: ParamSpec, clean: bool) -> st.SearchStrategy:
    """In-bounds values; unless ``clean``, sometimes out-of-bounds ones too."""
    lo = int(spec.minimum) if spec.minimum is not None else -1
    if spec.kind == "int":
        values = st.integers(max(lo, -1), max(lo, -1) + 6)
        if not clean and spec.minimum is not None:
            values = st.one_of(values, st.just(lo - 1))
    elif spec.kind == "float":
        hi = spec.maximum if spec.maximum is not None else 2.0
        values = st.floats(spec.minimum or 0.0, hi)
        if not clean:
            values = st.one_of(values, st.just(-0.5))
    elif spec.kind == "bool":
        values = st.booleans()
    elif spec.kind == "choice":
        values = st.sampled_from(spec.choices)
    elif spec.kind == "ints":
        item = st.integers(max(lo, -1), max(lo, -1) + 4)
        size = (spec.length, spec.length) if spec.length else (1, 3)
        values = st.lists(item, min_size=size[0], max_size=size[1])
    else:
        values = st.text(max_size=3)
    return st.one_of(st.none(), values) if spec.optional else values


@st.composite
def random_graphs(draw: st.DrawFn) -> Graph:
    # Hypothesis favours the first/smallest choices, so those are the sensible ones throughout.
    clean = draw(st.sampled_from([True, True, True, False]))  # most graphs are wired and parametrised sensibly
    shapes, types = FAMILIES[draw(st.sampled_from(sorted(FAMILIES)))]
    layers = [s for s in LAYERS if s.type in types]
    g = Graph(InputSpec(draw(st.sampled_from(shapes))), draw(st.integers(1, 12)))
    g.add_node("Input", "input")
    ids = ["input"]
    for i in range(draw(st.integers(1, 6))):
        spec = draw(st.sampled_from(layers))
        changed = [False, False, False, True] if clean else [False, True]  # how often a parameter is set
        params = {p.name: draw(param_value(p, clean)) for p in spec.params if draw(st.sampled_from(changed))}
        node_id = f"n{i}"
        g.add_node(spec.type, node_id, params, check=False)  # bad values stay, as from a hand-edited file
        if not spec.inputs:  # a source (a learnable Parameter): nothing to wire into it
            ids.append(node_id)
            continue
        port = spec.inputs[0]
        if clean:
            n_in = draw(st.sampled_from([2, 2, 3])) if port.variadic else 1
        else:
            n_in = draw(st.integers(0, 3)) if port.variadic else draw(st.sampled_from([1, 0, 1, 2]))
        for _ in range(n_in):
            # Mostly the previous node, sometimes any earlier one (branches, merges).
            src = ids[-1] if draw(st.sampled_from([True, True, False])) else draw(st.sampled_from(ids))
            g.add_edge(Edge(src, node_id, "out", port.name), check=False)
        ids.append(node_id)
    if draw(st.sampled_from([True, True, False])):  # a classifier head, so that many graphs end in logits
        g.add_node("Flatten", "head_flatten")
        g.add_node("Linear", "head", {"out_features": g.num_classes})
        g.add_edge(Edge(ids[-1], "head_flatten"), check=False)
        g.add_edge(Edge("head_flatten", "head"), check=False)
        ids.append("head")
    g.add_node("Output", "output")
    g.add_edge(Edge(ids[-1], "output"), check=False)
    return g


def shapes_on_meta(module: fx.GraphModule, x: torch.Tensor) -> dict[str, tuple[int, ...]]:
    seen: dict[str, tuple[int, ...]] = {}

    class Recorder(fx.Interpreter):
        def run_node(self, n: fx.Node):  # noqa: ANN202
            out = super().run_node(n)
            if n.op == "call_module":   # a layer with several outputs: validation's shape is its first
                seen[str(n.target)] = tuple((out[0] if isinstance(out, tuple) else out).shape)
            return out

    Recorder(module).run(x)
    return seen


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_graphs())
def test_random_graph_builds_and_runs_or_reports_located_problems(graph):
    batch = 2  # BatchNorm refuses a batch of one in training mode
    inf = validate(graph, batch)
    try:
        module = build_module(graph, batch=batch, device="meta", inference=inf)
    except BuildError as exc:
        errors = [p for p in exc.problems if p.severity == "error"]
        assert errors, "a BuildError must say why"
        for p in errors:
            assert p.node in graph.nodes, f"problem not located at a node: {p}"
            assert p.message
        return
    with FlopCounterMode(display=False) as counter:
        seen = shapes_on_meta(module, example_input(graph, batch, device="meta"))
    for node_id, shape in seen.items():
        assert shape == inf.shapes[node_id], f"{node_id}: torch gives {shape}, validation said {inf.shapes[node_id]}"
    a = analyze(graph, batch)
    assert a.output_shape == inf.shapes["output"] == (batch, graph.num_classes)
    assert a.total_params == sum(p.numel() for p in module.parameters())
    assert a.total_flops == counter.get_total_flops()


@settings(max_examples=40, deadline=None)
@given(random_graphs())
def test_validation_never_raises_and_locates_every_error(graph):
    for p in validate(graph).problems:
        assert p.node in graph.nodes


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_graphs())
def test_any_built_graph_imports_back_to_the_same_layers(graph):
    """build_module then import_module (both on meta) gives back every layer with its parameters."""
    imports_back(graph)


def test_a_scale_built_on_meta_imports_back_with_the_factor_it_was_built_with():
    """Hypothesis found it: on meta gamma has no values, and its init_value 0.0 came back as the default 1e-5."""
    for init in (0.0, 0.5, 1e-5):
        graph = Graph(InputSpec((12,)), 1, {"name": "scale"})
        graph.chain(("Input", "input"), ("Scale", "n0", {"init_value": init}), ("Flatten", "head_flatten"),
                    ("Linear", "head", {"out_features": 1}), ("Output", "output"))
        imports_back(graph)


def imports_back(graph: Graph) -> None:
    inf = validate(graph, 2)
    output = graph.nodes_of_type("Output")[0].id
    if not inf.ok or not all(graph.reaches(n.id, output) for n in graph):
        return   # a branch that ends nowhere: what its import keeps depends on the node (a Constant's goes)
    module = build_module(graph, batch=2, device="meta", inference=inf)
    graph.num_classes = inf.shapes["output"][-1]
    back = import_module(module, graph.input_spec.shape, graph.num_classes).graph
    assert sorted((n.id, n.type) for n in back) == sorted((n.id, n.type) for n in graph)  # order: topological
    assert sorted(map(str, back.edges)) == sorted(map(str, graph.edges))
    again = validate(back, 2)
    for node in graph:  # parameters left to "take it from the input" come back as explicit values
        explicit = {k: v for k, v in inf.params[node.id].items() if v is not None}
        imported = {k: v for k, v in again.params[node.id].items() if k in explicit}
        if node.type == "Scale":   # a module keeps its factor's shape, not the dim it was written with:
            rank = len(inf.shapes[node.id])   # dim 1 of [B, C] comes back as -1, the same dim
            explicit["dim"] %= rank
            imported["dim"] %= rank
        if node.type == "Interpolate" and explicit.get("size") is not None:   # the size decides: the factor
            explicit.pop("scale_factor", None)            # (2.0 by default) is unused and imports as None
            imported.pop("scale_factor", None)
        assert imported == explicit, node.id
