"""capture_autograd against oracles: the profiler's bytes on a real CPU step, a hand-written module
walked directly, and the templates' own structure."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function

from graph_editor.autograd.capture import LOSS, CaptureError, capture_autograd, graph_content_hash
from graph_editor.building import build_module, example_input
from graph_editor.model import Graph, InputSpec
from graph_editor.model.serialize import load_graph
from tests.graph_editor.graph_testing import TEMPLATES


def _live_bytes_at_backward(graph: Graph, batch: int) -> int:
    """Bytes allocated by a real CPU forward and still live when backward starts (torch.profiler)."""
    torch.manual_seed(0)
    module = build_module(graph, batch=batch, device="cpu")
    x, y = example_input(graph, batch), torch.zeros(batch, dtype=torch.int64)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        logits = module(x)
        loss = F.cross_entropy(logits, y)
        with record_function("studio::backward"):
            loss.backward()
    events = prof.profiler.kineto_results.events()
    start = min(e.start_ns() for e in events if e.name() == "studio::backward")
    live = sum(e.nbytes() for e in events if e.name() == "[memory]" and e.start_ns() < start)
    # Python still holds the logits and the loss (not saved for backward); the rest is what autograd saved.
    return live - logits.untyped_storage().nbytes() - loss.untyped_storage().nbytes()


@pytest.mark.slow
@pytest.mark.parametrize(("name", "batch"), [("digits_cnn", 16), ("resnet18_cifar", 4), ("vit_tiny", 1)])
def test_saved_bytes_match_the_profiler_on_a_real_cpu_step(name, batch):
    graph = load_graph(TEMPLATES / f"{name}.graph.json")
    measured = _live_bytes_at_backward(graph, batch)
    captured = capture_autograd(graph, batch, use_cache=False)
    assert captured.device == "fake-cpu", captured.note
    assert captured.saved_bytes == pytest.approx(measured, rel=0.01)


class HandNet(nn.Module):
    """A residual convnet written by hand; its children are the owners."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(8)
        self.relu2 = nn.ReLU()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.relu1(self.bn1(self.conv1(x)))
        b = self.relu2(self.bn2(self.conv2(a)) + a)
        return self.fc(self.flatten(self.pool(b)))


def _walk_by_hand(net: HandNet, x: torch.Tensor) -> dict[str, list[str]]:
    """Owners found without hooks: run the children one by one and, after each, take the nodes newly
    reachable from its output. The skip connection's add belongs to no child: it is walked apart."""
    seen: set = set()
    owned: dict[str, list[str]] = {}

    def take(owner: str, t: torch.Tensor) -> None:
        stack, names = [t.grad_fn], []
        while stack:
            fn = stack.pop()
            if fn is None or fn in seen:
                continue
            seen.add(fn)
            names.append(fn.name().removeprefix("torch::autograd::"))
            stack.extend(n for n, _ in fn.next_functions)
        owned.setdefault(owner, []).extend(names)

    a = x
    for name in ("conv1", "bn1", "relu1"):
        a = getattr(net, name)(a)
        take(name, a)
    b = a
    for name in ("conv2", "bn2"):
        b = getattr(net, name)(b)
        take(name, b)
    b = b + a
    take("relu2", b)  # with hooks, the add is claimed by the next module to finish: relu2
    b = net.relu2(b)
    take("relu2", b)
    for name in ("pool", "flatten", "fc"):
        b = getattr(net, name)(b)
        take(name, b)
    loss = F.cross_entropy(b, torch.zeros(len(x), dtype=torch.int64))
    take(LOSS, loss)
    return owned


def test_node_counts_and_owners_match_a_hand_written_module_walked_directly():
    torch.manual_seed(0)
    net = HandNet()
    expected = _walk_by_hand(net, torch.randn(2, 1, 8, 8))
    weights = {k: v.clone() for k, v in net.state_dict().items()}
    captured = capture_autograd(net, 2, input_shape=(1, 8, 8))
    got = {owner: sorted(n.name for n in nodes) for owner, nodes in captured.by_owner().items()}
    assert got == {owner: sorted(names) for owner, names in expected.items()}
    assert captured.owners == ["conv1", "bn1", "relu1", "conv2", "bn2", "relu2", "pool", "flatten", "fc", LOSS]
    assert sorted(n.name for n in captured.by_owner()["relu2"]) == ["AddBackward0", "ReluBackward0"]
    # the module is left as it was: same tensors, same values, no gradients
    assert all(torch.equal(weights[k], v) for k, v in net.state_dict().items())
    assert all(p.grad is None for p in net.parameters())


@pytest.mark.slow
def test_every_template_is_fully_attributed():
    for path in sorted(TEMPLATES.glob("*.graph.json")):
        graph = load_graph(path)
        captured = capture_autograd(graph, 2)
        ids = {n.id for n in graph}
        module_params = {name for name, _ in build_module(graph, device="meta").named_parameters()}
        by_owner = captured.by_owner()
        assert set(captured.owners) <= ids | {LOSS}, path.name
        assert sorted(n.name for n in by_owner[LOSS]) == ["LogSoftmaxBackward0", "NllLossBackward0"], path.name
        fed = [n.param for n in captured.nodes if n.name == "AccumulateGrad"]
        assert sorted(fed) == sorted(module_params), path.name  # one AccumulateGrad per parameter
        for node in captured.nodes:
            if node.param:
                assert node.param.split(".")[0] == node.owner, (path.name, node)
        # a DAG in backward order: gradients only flow to later indices, and all reach from the loss
        assert all(src < dst for src, dst in captured.edges), path.name
        assert captured.nodes[0].owner == LOSS


@pytest.mark.slow
def test_digits_structure_summary_and_cache():
    graph = load_graph(TEMPLATES / "digits_cnn.graph.json")
    captured = capture_autograd(graph, 8)
    assert len(captured.nodes) == 31
    summary = {s.owner: s for s in captured.summaries()}
    assert summary["conv1"].names == {"ConvolutionBackward0": 1, "AccumulateGrad": 2}
    assert summary["conv1"].saved_bytes == 0  # it saves the input batch and its weight: neither counted
    assert summary["relu1"].saved_bytes == 8 * 32 * 8 * 8 * 4  # its fp32 result
    assert summary["bn1"].grads_to == ("conv1",) and summary[LOSS].grads_to == ("fc",)
    assert sum(s.saved_bytes for s in summary.values()) == captured.saved_bytes
    assert capture_autograd(graph, 8) is captured
    moved = graph.copy()
    moved.move_node("conv1", (500.0, 500.0))
    assert graph_content_hash(moved) == graph_content_hash(graph)
    assert capture_autograd(moved, 8) is captured
    assert capture_autograd(graph, 8, "bf16") is not captured


def test_bf16_saves_bf16_activations_and_casts():
    graph = load_graph(TEMPLATES / "digits_cnn.graph.json")
    fp32, bf16 = capture_autograd(graph, 8), capture_autograd(graph, 8, "bf16")
    conv2 = [n for n in bf16.nodes if n.owner == "conv2" and n.name == "ConvolutionBackward0"][0]
    assert {s.dtype for s in conv2.saved} == {"bfloat16"}
    assert 0 < bf16.saved_bytes < fp32.saved_bytes


def test_bad_requests_are_refused_by_name():
    graph = Graph(InputSpec((4,)), 2)
    graph.chain(("Input", "input"), ("Linear", "fc", {"out_features": 2}), ("Output", "output"))
    with pytest.raises(CaptureError, match="batch"):
        capture_autograd(graph, 0)
    with pytest.raises(CaptureError, match="precision 'fp64'"):
        capture_autograd(graph, 2, "fp64")
    with pytest.raises(CaptureError, match="device kind 'tpu'"):
        capture_autograd(graph, 2, device_kind="tpu")
    with pytest.raises(CaptureError, match="input_shape"):
        capture_autograd(nn.Linear(4, 2), 2)


@pytest.mark.skipif(torch.backends.cuda.is_built(), reason="the CPU-only build's fallback")
def test_cuda_kind_on_a_cpu_only_build_is_captured_as_on_the_cpu_and_says_so():
    graph = load_graph(TEMPLATES / "digits_cnn.graph.json")
    captured = capture_autograd(graph, 4, device_kind="cuda", use_cache=False)
    assert captured.device == "fake-cpu" and captured.device_kind == "cuda"
    assert "no CUDA support" in captured.note
    assert captured.saved_bytes == capture_autograd(graph, 4).saved_bytes


class _RefusesFake(nn.Module):
    """Stands for an op fake tensors cannot run (a kernel without a fake implementation)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from graph_editor.building.fake import is_fake

        if is_fake(x):
            raise NotImplementedError("no fake implementation")
        return x * 2


def test_an_op_fake_tensors_refuse_falls_back_to_meta_and_says_so():
    net = nn.Sequential()
    net.add_module("fc", nn.Linear(4, 8))
    net.add_module("odd", _RefusesFake())
    net.add_module("head", nn.Linear(8, 3))
    captured = capture_autograd(net, 2, input_shape=(4,))
    assert captured.device == "meta"
    assert "fake cpu tensors refused the step (NotImplementedError" in captured.note and "on meta" in captured.note
    assert [n.name for n in captured.by_owner()["odd"]] == ["MulBackward0"]
    [saved] = captured.by_owner()["odd"][0].saved       # x * 2 saves only its scalar, as a 0-d tensor
    assert (saved.name, saved.shape) == ("other", ())
    assert all(p.device.type == "cpu" for p in net.parameters())   # the module is left as it was


def test_a_step_the_graph_cannot_take_names_its_node_not_a_traceback():
    """The mlp template's BatchNorm1d cannot train on a batch of one: the capture says which node
    and why, with what to change (it was a bare ValueError from F.batch_norm)."""
    graph = load_graph(TEMPLATES / "mlp.graph.json")
    with pytest.raises(CaptureError) as info:
        capture_autograd(graph, 1, use_cache=False)
    message = str(info.value)
    assert message.startswith("node bn1 (BatchNorm1d) fails in a training step at batch 1: Expected more than 1 value")
    assert message.endswith("needs a batch of 2 or more") and info.value.node == "bn1"
    assert capture_autograd(graph, 2, use_cache=False).nodes  # a batch of two captures
