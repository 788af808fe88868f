"""graph_editor.building.fake: a meta-built module runs a CPU training step as fake tensors."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from graph_editor.building import build_module
from graph_editor.building.fake import empty_parameters, fake_batch, fake_cpu, is_fake
from graph_editor.model.serialize import load_graph
from tests.graph_editor.graph_testing import TEMPLATES


def test_fake_cpu_step_on_a_meta_built_template():
    graph = load_graph(TEMPLATES / "digits_cnn.graph.json")
    module = build_module(graph, batch=4, device="meta")
    originals = [p for p in module.parameters()]
    with fake_cpu(module, channels_last=True):
        x, y = fake_batch(graph, 4, channels_last=True)
        assert is_fake(x) and x.device.type == "cpu" and x.shape[0] == 4
        assert x.is_contiguous(memory_format=torch.channels_last)
        params = list(module.parameters())
        assert all(is_fake(p) and p.device.type == "cpu" for p in params)
        loss = F.cross_entropy(module(x), y)
        loss.backward()
        assert all(p.grad is not None and p.grad.shape == p.shape for p in params)
    # the module's own tensors are back, untouched
    assert [p for p in module.parameters()] == originals
    assert all(p.device.type == "meta" for p in module.parameters())


def test_real_module_is_restored_and_shared_weights_stay_shared():
    torch.manual_seed(0)
    lin = nn.Linear(3, 3)
    net = nn.Sequential(lin, nn.ReLU(), lin, nn.BatchNorm1d(3))
    before = {k: v.clone() for k, v in net.state_dict().items()}
    with empty_parameters(net, "meta"):
        assert net[0].weight is net[2].weight and net[0].weight.device.type == "meta"
        assert isinstance(net[0].weight, nn.Parameter) and net[3].running_mean.device.type == "meta"
        net(torch.empty(2, 3, device="meta")).sum().backward()
    after = net.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert net[0].weight.grad is None


def test_fake_batch_refuses_a_bad_batch():
    try:
        fake_batch((3,), 0, device="meta")
    except ValueError as exc:
        assert "batch" in str(exc)
    else:
        raise AssertionError("batch 0 accepted")
