"""Templates: published parameter counts, and analysis against PyTorch's own counters."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from graph_testing import ROOT, TEMPLATES
from torch.utils.flop_counter import FlopCounterMode

from graph_editor.build import analyze, build_module, example_input
from graph_editor.model import load_graph, validate

# Published figures: torchvision's model cards, timm's vit_tiny_patch16_224, LeCun et al. 1998.
PUBLISHED = {
    "lenet5": 61_706,
    "resnet18": 11_689_512,
    "resnet18_cifar": 11_173_962,
    "mobilenet_v2": 3_504_872,
    "vgg11": 132_863_336,
    "vit_tiny": 5_717_416,
}
ALL = sorted(p.name.removesuffix(".graph.json") for p in TEMPLATES.glob("*.graph.json"))
EXPECTED_INPUTS = {
    "mlp": ((64,), 10), "lenet5": ((1, 32, 32), 10), "digits_cnn": ((1, 8, 8), 10),
    "resnet18": ((3, 224, 224), 1000), "mobilenet_v2": ((3, 224, 224), 1000), "vgg11": ((3, 224, 224), 1000),
    "resnet18_cifar": ((3, 32, 32), 10), "vit_tiny": ((3, 224, 224), 1000),
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


@pytest.mark.parametrize("name", ALL)
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


def test_positions_are_laid_out_left_to_right():
    for name in ALL:
        graph = load_graph(TEMPLATES / f"{name}.graph.json")
        positions = {n.position for n in graph}
        assert len(positions) == len(graph), f"{name}: two nodes share a position"
        for e in graph.edges:  # every wire runs rightwards
            assert graph.nodes[e.dst].position[0] > graph.nodes[e.src].position[0], (name, str(e))


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
