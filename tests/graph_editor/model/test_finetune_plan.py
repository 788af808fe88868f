"""The fine-tuning plan and the sweep variables of a design: undoable edits, kept in the graph file,
turned into the run spec's fields and a sweep's space tokens, bad input named."""

from __future__ import annotations

from pathlib import Path

import pytest

from graph_editor.model import CommandError
from graph_editor.model.commands import UndoStack
from graph_editor.model.finetune import head_node, plan_of, replace_head, set_frozen, set_lr_scale
from graph_editor.model.serialize import load_graph, loads, save_graph
from graph_editor.model.sweep_vars import SetSweepVariable, space_tokens, variables

TEMPLATES = Path(__file__).resolve().parents[3] / "assets" / "templates"


def test_the_head_of_every_shipped_template_is_found():
    heads = {p.name.removesuffix(".graph.json"): head_node(load_graph(p)) for p in TEMPLATES.glob("*.graph.json")}
    assert heads["resnet18"] == "fc" and heads["mobilenet_v2"] == "classifier_1" and heads["vit_tiny"] == "head"
    assert heads["vgg11"] == "classifier_6" and all(heads.values())


def test_replace_head_is_one_undo_step_and_marks_the_head_for_a_fresh_start():
    g = load_graph(TEMPLATES / "resnet18.graph.json")
    stack = UndoStack()
    stack.push(replace_head(g, 37))
    assert g.nodes["fc"].params["out_features"] == 37 and g.num_classes == 37
    assert plan_of(g).reinit == ["fc"]
    stack.undo()
    assert g.nodes["fc"].params["out_features"] == 1000 and g.num_classes == 1000 and plan_of(g).is_empty()
    with pytest.raises(CommandError, match="at least 2 classes"):
        replace_head(g, 1)


def test_frozen_blocks_and_multipliers_become_the_run_spec_s_fields(tmp_path):
    g = load_graph(TEMPLATES / "resnet18.graph.json")
    stack = UndoStack()
    stack.push(set_frozen(g, ["g_stem", "g_layer1"], True))
    stack.push(set_lr_scale(g, ["g_layer2", "conv1"], 0.1))
    stack.push(replace_head(g, 5))
    path = tmp_path / "tuned.graph.json"
    save_graph(g, path)
    back = load_graph(path)                                   # kept in the file
    fields = plan_of(back).spec_fields(back)
    assert fields == {"model.frozen": ["g_stem", "g_layer1"], "model.lr_scale": ["g_layer2=0.1", "conv1=0.1"],
                      "model.reinit": ["fc"]}
    marks = plan_of(back).node_marks(back)
    assert marks["layer1_0_conv1"]["frozen"] and marks["conv1"] == {"frozen": True, "lr_scale": 0.1}
    stack.push(set_frozen(g, ["g_stem"], False))
    assert plan_of(g).frozen == ["g_layer1"]
    with pytest.raises(CommandError, match="multiplier of conv1 must be 0 to 100"):
        set_lr_scale(g, ["conv1"], 500.0)
    with pytest.raises(CommandError, match="no block or node 'nope'"):
        set_frozen(g, ["nope"], True)


def test_the_trainer_reads_the_plan_s_fields_as_a_valid_spec():
    from trainer.finetune import node_ids
    from trainer.spec import spec_from_dict

    g = load_graph(TEMPLATES / "resnet18.graph.json")
    UndoStack().push(set_frozen(g, ["g_stem", "layer2_0_conv1"], True))
    fields = plan_of(g).spec_fields(g)
    spec = spec_from_dict({"model": {"frozen": fields["model.frozen"]}})
    assert node_ids(g, spec.model.frozen, "model.frozen")[0] == g.groups["g_stem"].nodes


def test_a_hand_edited_plan_of_the_wrong_types_is_dropped_not_fatal():
    g = load_graph(TEMPLATES / "digits_cnn.graph.json")
    g.metadata["finetune"] = {"frozen": "conv1", "lr_scale": {"conv1": "fast", "conv2": 0.5, "fc": 1e9}}
    text = (TEMPLATES / "digits_cnn.graph.json").read_text()
    assert loads(text).metadata.get("finetune") is None
    plan = plan_of(g)
    assert plan.frozen == [] and plan.lr_scale == {"conv2": 0.5}


def test_sweep_variables_are_undoable_and_become_space_tokens():
    g = load_graph(TEMPLATES / "digits_cnn.graph.json")
    stack = UndoStack()
    stack.push(SetSweepVariable(g, "conv1", "out_channels", "16..64:step16"))
    stack.push(SetSweepVariable(g, "dropout", "p", "0.1|0.3|0.5"))
    assert space_tokens(g) == ["node.conv1.out_channels=16..64:step16", "node.dropout.p=0.1|0.3|0.5"]
    stack.undo()
    assert variables(g) == {"conv1.out_channels": "16..64:step16"}
    stack.push(SetSweepVariable(g, "conv1", "out_channels", ""))
    assert variables(g) == {} and "sweep" not in g.metadata
    with pytest.raises(CommandError, match="'16-64' is not a range"):
        SetSweepVariable(g, "conv1", "out_channels", "16-64")
    with pytest.raises(CommandError, match="conv1 has no parameter 'width'"):
        SetSweepVariable(g, "conv1", "width", "1..2")
