"""Templates: published parameter counts, and analysis against PyTorch's own counters."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from graph_editor.analysis import analyze
from graph_editor.building import build_module, example_input
from graph_editor.model import load_graph, validate
from graph_editor.model.geometry import box_size, node_size
from graph_editor.model.hierarchy import external_ports, parents
from tests.graph_editor.graph_testing import ROOT, TEMPLATES

# Published figures: torchvision's model cards, timm's vit_tiny_patch16_224, LeCun et al. 1998.
PUBLISHED = {
    "lenet5": 61_706,
    "resnet18": 11_689_512,
    "resnet18_cifar": 11_173_962,
    "resnet50": 25_557_032,
    "mobilenet_v2": 3_504_872,
    "vgg11": 132_863_336,
    "vit_tiny": 5_717_416,
}
ALL = sorted(p.name.removesuffix(".graph.json") for p in TEMPLATES.glob("*.graph.json"))
EXPECTED_INPUTS = {
    "mlp": ((64,), 10), "lenet5": ((1, 32, 32), 10), "digits_cnn": ((1, 8, 8), 10),
    "resnet18": ((3, 224, 224), 1000), "mobilenet_v2": ((3, 224, 224), 1000), "vgg11": ((3, 224, 224), 1000),
    "resnet18_cifar": ((3, 32, 32), 10), "vit_tiny": ((3, 224, 224), 1000), "resnet50": ((3, 224, 224), 1000),
}


def test_every_required_template_exists():
    assert set(EXPECTED_INPUTS) <= set(ALL)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_count_equals_published(name):
    graph = load_graph(TEMPLATES / f"{name}.graph.json")
    assert analyze(graph).total_params == PUBLISHED[name]
    with torch.device("meta"):
        module = build_module(graph, device="meta")
    assert sum(p.numel() for p in module.parameters()) == PUBLISHED[name]


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n == "resnet50" else [])
                                  for n in ALL])   # resnet50's counters: ~2.4 s, in make test, not test-fast
def test_template_validates_builds_and_matches_pytorch_counters(name):
    graph = load_graph(TEMPLATES / f"{name}.graph.json")
    shape, classes = EXPECTED_INPUTS[name]
    assert (graph.input_spec.shape, graph.num_classes) == (shape, classes)
    assert {"name", "description"} <= set(graph.metadata)
    inf = validate(graph)
    assert inf.ok, inf.problems
    assert not inf.problems  # not even a warning (no dangling node)

    batch = 2
    module = build_module(graph, batch=batch, device="meta")
    a = analyze(graph, batch=batch)
    with FlopCounterMode(display=False) as counter:
        out = module(example_input(graph, batch, device="meta"))
    assert tuple(out.shape) == (batch, classes) == a.output_shape
    assert a.total_flops == counter.get_total_flops()
    assert a.total_params == sum(p.numel() for p in module.parameters())
    # The counter names modules "ClassName.node_id" (and deeper for submodules of a node).
    per_node = {k.split(".")[1]: sum(v.values()) for k, v in counter.get_flop_counts().items() if k.count(".") == 1}
    for stats in a.nodes:
        assert per_node.get(stats.id, 0) == stats.flops, stats.id
        if stats.params:
            assert stats.params == sum(p.numel() for p in module.get_submodule(stats.id).parameters())


def test_small_templates_run_for_real_with_the_analysed_flops():
    for name in ("mlp", "lenet5", "digits_cnn"):
        graph = load_graph(TEMPLATES / f"{name}.graph.json")
        module = build_module(graph).eval()
        with FlopCounterMode(display=False) as counter:
            out = module(example_input(graph, 3))
        assert out.shape == (3, 10) and torch.isfinite(out).all()
        assert counter.get_total_flops() == analyze(graph, batch=3).total_flops


def _unit_rects(graph, scope):
    """(name, x0, y0, x1, y1) of what shows directly inside ``scope`` (None: the top) when every
    group inside it is collapsed: blocks at their members' corner, loose nodes."""
    up = parents(graph.groups)
    inside = graph.groups[scope].nodes if scope else list(graph.nodes)
    kids = [k for k in graph.groups if up[k] == scope]
    rects = []
    for k in kids:
        ps = [graph.nodes[n].position for n in graph.groups[k].nodes]
        w, h = box_size(external_ports(graph, graph.groups[k].nodes).count)
        x, y = min(p[0] for p in ps), min(p[1] for p in ps)
        rects.append((k, x, y, x + w, y + h))
    held = {n for k in kids for n in graph.groups[k].nodes}
    for n in inside:
        if n not in held:
            (x, y), (w, h) = graph.nodes[n].position, node_size(graph.nodes[n])
            rects.append((n, x, y, x + w, y + h))
    return rects


@pytest.mark.parametrize("name", ALL)
def test_templates_are_laid_out_without_overlap_at_every_level(name):
    graph = load_graph(TEMPLATES / f"{name}.graph.json")
    for scope in (None, *graph.groups):
        rects = _unit_rects(graph, scope)
        for i, a in enumerate(rects):
            for b in rects[i + 1:]:
                assert a[3] <= b[1] or b[3] <= a[1] or a[4] <= b[2] or b[4] <= a[2], (name, scope, a, b)
    top = _unit_rects(graph, None)
    width = max(r[3] for r in top) - min(r[1] for r in top)
    assert width < 3000, f"{name}: the top level is {width:.0f} px wide"
    if len(graph) > 20:  # a big network opens as a few blocks, not a long line of layers
        assert len(top) <= 14 and graph.groups, name


def test_templates_span_two_dimensions_and_wires_run_forward_within_a_row():
    for name in ALL:
        graph = load_graph(TEMPLATES / f"{name}.graph.json")
        xs, ys = {n.position[0] for n in graph}, {n.position[1] for n in graph}
        if len(graph) > 20:
            assert len(xs) > 1 and len(ys) > 1, f"{name}: every node in one line"
        up = parents(graph.groups)
        for scope in (None, *graph.groups):
            rects = {r[0]: r for r in _unit_rects(graph, scope)}
            unit = {}
            for k in rects:
                for n in graph.groups[k].nodes if k in graph.groups and up[k] == scope else [k]:
                    unit[n] = k
            for e in graph.edges:  # a wire between two units side by side in a row runs rightwards
                a, b = rects.get(unit.get(e.src)), rects.get(unit.get(e.dst))
                if a and b and a is not b and a[2] == b[2]:
                    assert a[3] <= b[1], (name, scope, str(e))


def test_big_templates_ship_grouped_by_their_architecture():
    resnet = load_graph(TEMPLATES / "resnet50.graph.json")
    names = {g.name: g for g in resnet.groups.values()}
    assert {"stem", "layer1", "layer2", "layer3", "layer4", "head", "layer1.0", "layer4.2"} <= set(names)
    assert names["layer3"].kind == "Sequential" and names["layer3.5"].kind == "Bottleneck"
    assert set(names["layer1.0"].nodes) < set(names["layer1"].nodes)
    top = [k for k, p in parents(resnet.groups).items() if p is None]
    assert [resnet.groups[k].name for k in top] == ["stem", "layer1", "layer2", "layer3", "layer4", "head"]
    assert all(g.collapsed for g in resnet.groups.values())
    vit = load_graph(TEMPLATES / "vit_tiny.graph.json")
    assert {g.name for g in vit.groups.values()} == {"embedding", "blocks", "head"}


def test_resnet_ids_mirror_torchvision_names():
    graph = load_graph(TEMPLATES / "resnet18.graph.json")
    keys = set(build_module(graph, device="meta").state_dict())
    for key in ("conv1.weight", "bn1.running_mean", "layer1_0_conv1.weight", "layer2_0_downsample_0.weight",
                "layer4_1_bn2.bias", "fc.weight"):
        assert key in keys


def test_committed_templates_are_what_the_script_makes():
    spec = importlib.util.spec_from_file_location("make_templates", ROOT / "tools" / "make_templates.py")
    assert spec and spec.loader
    make_templates = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_templates)
    assert make_templates.main(["--check"]) == 0
