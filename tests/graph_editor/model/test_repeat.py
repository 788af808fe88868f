"""A block repeated N times: kept in the graph file, built and analysed as N copies in a chain (the
copies' weights their own), refused with the reason when the block cannot repeat, undoable."""

from __future__ import annotations

import json

import pytest
import torch

from graph_editor.analysis import analyze
from graph_editor.building import build_module
from graph_editor.model import graph_from_dict, graph_to_dict, load_graph
from graph_editor.model.commands import UndoStack
from graph_editor.model.errors import CommandError, GraphFileError
from graph_editor.model.graph import Group
from graph_editor.model.repeat import SetRepeat, unrolled
from graph_editor.model.sweep_vars import SetSweepVariable, space_tokens
from tests.import_graph import ROOT

TEMPLATES = ROOT / "assets" / "templates"
BLOCK = "g_layer1_1"        # resnet18_cifar's second BasicBlock of layer1: 64 channels in and out


@pytest.fixture
def resnet():
    return load_graph(TEMPLATES / "resnet18_cifar.graph.json")


def test_a_repeated_block_builds_as_copies_in_a_chain(resnet):
    base = analyze(resnet)
    stack = UndoStack()
    stack.push(SetRepeat(resnet, BLOCK, 3))
    block = resnet.groups[BLOCK]
    full = unrolled(resnet)
    assert len(full.nodes) == len(resnet.nodes) + 2 * len(block.nodes)
    assert {f"{n}_r3" for n in block.nodes} <= set(full.nodes) and full is not resnet
    module = build_module(resnet, device="meta")
    own = sum(p.numel() for n, p in module.named_parameters() if n.split(".")[0] in block.nodes)
    assert sum(p.numel() for p in module.parameters()) == base.total_params + 2 * own
    assert analyze(resnet).total_params == base.total_params + 2 * own
    assert module(torch.randn(2, *resnet.input_spec.shape, device="meta")).shape == (2, 10)
    stack.undo()
    assert resnet.groups[BLOCK].repeat == 1 and unrolled(resnet) is resnet


def test_the_count_is_kept_in_the_file_and_a_bad_one_is_named(resnet):
    SetRepeat(resnet, BLOCK, 4).redo()
    data = json.loads(json.dumps(graph_to_dict(resnet)))
    assert graph_from_dict(data).groups[BLOCK].repeat == 4
    i = next(i for i, g in enumerate(data["groups"]) if g["id"] == BLOCK)
    data["groups"][i]["repeat"] = 0
    with pytest.raises(GraphFileError) as err:
        graph_from_dict(data)
    assert err.value.field == f"groups[{i}].repeat" and "from 1 to 32" in str(err.value)


def test_a_block_that_cannot_repeat_is_refused_with_the_reason(resnet):
    with pytest.raises(CommandError, match=r"'head' cannot repeat 2 times: its copy fails at avgpool_r2: .*"
                                           r"each copy takes the previous copy's output"):
        SetRepeat(resnet, "g_head", 2)        # a second global pool on the classes
    SetRepeat(resnet, "g_layer2_0", 2).redo()    # 64 -> 128 channels at stride 2, then 128 -> 256: it works
    resnet.groups["g_in"] = Group("g_in", "in", ["input", "conv1"])
    with pytest.raises(CommandError, match="'in' holds the graph's Input or Output"):
        SetRepeat(resnet, "g_in", 2)
    resnet.groups["g_two"] = Group("g_two", "two", ["layer1_0_bn2", "layer1_0_add"])   # the conv and the skip
    with pytest.raises(CommandError, match=r"'two' cannot repeat: it takes 2 input\(s\) and gives 1 output"):
        SetRepeat(resnet, "g_two", 2)
    with pytest.raises(CommandError, match="whole number from 1 to 32"):
        SetRepeat(resnet, BLOCK, 33)
    assert [g.id for g in resnet.groups.values() if g.repeat != 1] == ["g_layer2_0"]


def test_the_repeat_count_is_a_sweep_variable(resnet):
    stack = UndoStack()
    stack.push(SetSweepVariable(resnet, BLOCK, "repeat", "1..4"))
    assert space_tokens(resnet) == [f"block.{BLOCK}.repeat=1..4"]
    with pytest.raises(CommandError, match="sweeps only its 'repeat' count"):
        SetSweepVariable(resnet, BLOCK, "out_channels", "1..4")
    stack.undo()
    assert space_tokens(resnet) == []
