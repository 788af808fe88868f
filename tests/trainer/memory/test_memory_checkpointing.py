"""Activation checkpointing over graph node ranges: same results, fewer saved bytes, a lower real peak."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from graph_editor.building import build_module
from tests.trainer.memory.test_memory_predict import measured_peak, template
from trainer.memory.prediction import predict_memory
from trainer.memory.recomputation import Checkpointed, SegmentError, checkpointed_module

BLOCKS = tuple(f"layer{i}_{j}_conv1..layer{i}_{j}_relu2" for i in range(1, 5) for j in range(2))


@pytest.mark.slow
def test_checkpointed_module_computes_the_same_loss_and_gradients():
    g = template("digits_cnn")
    torch.manual_seed(0)
    plain = build_module(g)
    ck = checkpointed_module(plain, g, ["conv1..relu1", "conv2..relu3"])
    assert ck.state_dict().keys() == plain.state_dict().keys()
    assert [n for n, m in ck.named_children() if isinstance(m, Checkpointed)] == ["checkpoint_0", "checkpoint_1"]
    assert sum(p.numel() for p in ck.parameters()) == sum(p.numel() for p in plain.parameters())
    x, y = torch.randn(4, 1, 8, 8), torch.tensor([1, 7, 0, 3])
    plain.eval(), ck.eval()       # batch statistics aside, the two must agree exactly
    grads = []
    for m in (plain, ck):
        m.zero_grad()
        F.cross_entropy(m(x), y).backward()
        grads.append([p.grad.clone() for p in m.parameters()])
    assert [n for n, _ in ck.named_parameters()] == [n for n, _ in plain.named_parameters()]
    for a, b in zip(*grads, strict=True):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("entries,message", [
    (["nope..fc"], "memory.checkpoint[0]: no layer node 'nope'"),
    (["fc..conv1"], "'fc' comes after 'conv1'"),
    (["g_layer1", "layer1_1_conv1..layer2_0_conv1"], "memory.checkpoint[1]: node 'layer1_1_conv1' is already in "
                                                     "memory.checkpoint[0]"),
    (["g_nothing"], "'g_nothing' is neither a group id nor a 'first..last' range"),
])
def test_bad_entries_are_named(entries, message):
    g = template("resnet18_cifar")
    with pytest.raises(SegmentError, match=message.replace("[", r"\[").replace("]", r"\]")):
        checkpointed_module(build_module(g, device="meta"), g, entries)


@pytest.mark.slow
def test_prediction_shows_the_saving():
    g = template("resnet18_cifar")
    plain, ck = predict_memory(g, 8), predict_memory(g, 8, checkpoint=BLOCKS)
    assert ck.checkpoint == list(BLOCKS)
    assert ck.parts["activations"] < plain.parts["activations"] / 3
    assert ck.peak_bytes < plain.peak_bytes


@pytest.mark.slow
def test_checkpointing_lowers_the_measured_peak_of_resnet18_cifar():
    g = template("resnet18_cifar")
    plain, ck = measured_peak(g, 8), measured_peak(g, 8, checkpoint=BLOCKS)
    assert ck < plain
    predicted = predict_memory(g, 8, checkpoint=BLOCKS).peak_bytes
    assert abs(predicted / ck - 1) <= 0.05
