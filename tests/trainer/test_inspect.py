"""trainer.inspection: per-node figures of an inspected step against a hand-written computation with
tensor hooks, the schedule of a live inspection, flags, and the report file."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F

from graph_editor.building import build_module
from graph_editor.model import load_graph
from trainer.inspection import (
    InspectReport,
    LiveInspection,
    NodeFigures,
    inspected_step,
    read_report,
    write_report,
)

from .helpers import DIGITS_CNN, tiny_cnn

CPU = torch.device("cpu")


def _by_hand(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, lr: float) -> dict[str, dict[str, float]]:
    """The figures computed directly: each child run in turn, a tensor hook on its output, then the
    parameters' gradients and an SGD-with-momentum step."""
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=0.01)
    grads: dict[str, torch.Tensor] = {}
    outs: dict[str, torch.Tensor] = {}
    h = x
    for name, child in model.named_children():
        h = child(h)
        outs[name] = h.detach().clone()
        h.register_hook(lambda g, name=name: grads.__setitem__(name, g.clone()))
    F.cross_entropy(h, y).backward()
    before = {n: [p.detach().clone() for p in c.parameters()] for n, c in model.named_children()}
    opt.step()
    figures = {}
    for name, child in model.named_children():
        ps = list(child.parameters())
        fig = {"grad_out": grads[name].norm().item(), "act_mean": outs[name].mean().item(),
               "act_std": outs[name].std().item(), "zero_fraction": (outs[name] == 0).float().mean().item()}
        if ps:
            w = math.sqrt(sum(b.norm().item() ** 2 for b in before[name]))
            fig["grad_w"] = math.sqrt(sum(p.grad.norm().item() ** 2 for p in ps))
            fig["weight"] = w
            fig["update_ratio"] = math.sqrt(sum((p.detach() - b).norm().item() ** 2
                                                for p, b in zip(ps, before[name], strict=True))) / w
        figures[name] = fig
    return figures


@pytest.mark.slow
def test_per_node_figures_match_tensor_hooks_by_hand():
    graph = load_graph(DIGITS_CNN)
    torch.manual_seed(0)
    model = build_module(graph, device="cpu")
    twin = copy.deepcopy(model)
    x, y = torch.randn(16, 1, 8, 8), torch.randint(0, 10, (16,))
    torch.manual_seed(1)  # dropout draws the same mask in both
    expected = _by_hand(twin, x, y, lr=0.05)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=0.01)
    torch.manual_seed(1)
    loss, pred, report = inspected_step(model, opt, x, y, step=7, device=CPU, precision="fp32")
    assert report.step == 7 and pred.shape == (16,) and math.isclose(report.loss, loss.item())
    assert [n.node for n in report.nodes] == [name for name, _ in model.named_children()]
    got = report.by_node()
    for name, fig in expected.items():
        for key, value in fig.items():
            assert getattr(got[name], key) == pytest.approx(value, rel=1e-4, abs=1e-7), (name, key)
        assert got[name].backward_s is not None and got[name].backward_s >= 0
    assert got["relu1"].grad_w is None and got["relu1"].update_ratio is None  # no parameters
    assert 0.3 < got["relu1"].zero_fraction < 0.7                         # ReLU of a normalised input
    # the step was a real step: the weights moved as the twin's did
    for (n, p), (_, q) in zip(model.named_parameters(), twin.named_parameters(), strict=True):
        assert torch.allclose(p, q, atol=1e-6), n


def test_bf16_step_reports_finite_figures():
    graph = tiny_cnn()
    torch.manual_seed(0)
    model = build_module(graph, device="cpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    _, _, report = inspected_step(model, opt, torch.randn(8, 1, 8, 8), torch.randint(0, 10, (8,)), step=1,
                                  device=CPU, precision="bf16")
    conv = report.by_node()["conv"]
    assert conv.grad_out > 0 and conv.grad_w > 0 and 0 < conv.update_ratio < 1
    assert report.flags() == []


def test_huge_init_scale_is_flagged_exploding_and_dead_weights_vanishing():
    torch.manual_seed(0)
    model = build_module(tiny_cnn(), device="cpu")
    with torch.no_grad():
        model.fc.weight.mul_(1e6)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    _, _, report = inspected_step(model, opt, torch.randn(8, 1, 8, 8), torch.randint(0, 10, (8,)), step=3,
                                  device=CPU, precision="fp32")
    flags = report.flags()
    assert ("conv", "exploding", "grad_w", report.by_node()["conv"].grad_w) in flags
    assert all(kind == "exploding" for _, kind, _, _ in flags)
    vanishing = InspectReport(5, 0.1, "cpu", [NodeFigures("fc", grad_out=1e-9, grad_w=2e-8)])
    assert vanishing.flags() == [("fc", "vanishing", "grad_out", 1e-9), ("fc", "vanishing", "grad_w", 2e-8)]


def test_live_inspection_on_request_and_every_n_seconds(tmp_path):
    torch.manual_seed(0)
    model = build_module(tiny_cnn(), device="cpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    now = [0.0]
    published: list[InspectReport] = []
    plain_calls = []

    def plain(x, y):
        plain_calls.append(1)
        return torch.zeros(()), torch.zeros(len(y), dtype=torch.long)

    live = LiveInspection(model, opt, device=CPU, precision="fp32", label_smoothing=0.0,
                          publish=published.append, every_s=2.0, start_step=lambda: 100, clock=lambda: now[0])
    step = live.wrap_step(plain)
    x, y = torch.randn(4, 1, 8, 8), torch.randint(0, 10, (4,))
    step(x, y)
    live.request()
    step(x, y)                     # requested: inspected, as step 102
    now[0] = 1.0
    step(x, y)
    now[0] = 2.5
    step(x, y)                     # 2 s since the last inspection: step 104
    step(x, y)
    assert [r.step for r in published] == [102, 104] and len(plain_calls) == 3
    path = write_report(published[0], tmp_path)
    assert path.name == "step-00000102.json" and read_report(path) == published[0]
    rows = published[0].metric_rows()
    assert (102, "inspect/grad_w/fc", published[0].by_node()["fc"].grad_w) in rows
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ValueError, match="bad.json: not an inspection report"):
        read_report(tmp_path / "bad.json")


def test_off_the_wrapper_only_counts_and_a_request_arms_it():
    torch.manual_seed(0)
    model = build_module(tiny_cnn(), device="cpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    published: list[InspectReport] = []
    live = LiveInspection(model, opt, device=CPU, precision="fp32", label_smoothing=0.0,
                          publish=published.append, every_s=0.0, start_step=lambda: 40)
    step = live.wrap_step(lambda x, y: (torch.zeros(()), torch.zeros(len(y), dtype=torch.long)))
    x, y = torch.randn(4, 1, 8, 8), torch.randint(0, 10, (4,))
    step(x, y)                     # the first step reads where training begins, then disarms
    assert not live.armed

    def refuse() -> bool:
        raise AssertionError("an unarmed step asked whether it was due")

    live.due = refuse
    for _ in range(5):
        step(x, y)
    del live.due
    live.request()
    step(x, y)
    assert [r.step for r in published] == [47] and not live.armed


def test_the_inspected_step_zeroes_gradients_before_the_forward_as_the_loop_does():
    torch.manual_seed(0)
    model = build_module(tiny_cnn(), device="cpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for p in model.parameters():
        p.grad = torch.ones_like(p)            # the last step's gradients
    seen = []
    first = next(iter(model.children()))
    first.register_forward_hook(lambda *_: seen.append([p.grad is None for p in model.parameters()]))
    inspected_step(model, opt, torch.randn(4, 1, 8, 8), torch.randint(0, 10, (4,)), step=1, device=CPU,
                   precision="fp32")
    assert seen and all(seen[0])


def test_non_finite_figures_survive_json(tmp_path):
    report = InspectReport(1, float("nan"), "cpu", [NodeFigures("fc", grad_out=float("inf"), grad_w=float("nan"))])
    back = read_report(write_report(report, tmp_path))
    assert back.loss is None and back.nodes[0].grad_out == 1e308 and back.nodes[0].grad_w is None
    assert ("fc", "exploding", "grad_out", float("inf")) in report.flags()


def test_history_keeps_series_and_the_step_a_flag_began():
    from trainer.inspection import InspectHistory

    def report(step: int, grad: float) -> InspectReport:
        return InspectReport(step, 1.0, "cpu", [NodeFigures("fc", grad_out=grad, grad_w=1.0)])

    history = InspectHistory([report(10, 1.0), report(20, 1e-9)])
    history.add(report(30, 1e-8))
    assert history.series("fc", "grad_out") == ([10, 20, 30], [1.0, 1e-9, 1e-8])
    [flag] = history.flags()
    assert (flag.node, flag.kind, flag.figure, flag.first_step, flag.step) == ("fc", "vanishing", "grad_out", 20, 30)
    history.add(report(40, 1.0))
    assert history.flags() == []
    history.add(report(50, 1e-9))
    assert history.flags()[0].first_step == 50


def test_reports_come_back_from_store_rows(tmp_path):
    from trainer.inspection import reports_from_metrics
    from trainer.store.runs import RunStore

    store = RunStore(f"sqlite:///{tmp_path / 'runs.sqlite'}")
    run = store.create_run(name="r", spec={}, graph={}, graph_hash="h", device="cpu", params=1)
    a = InspectReport(5, 2.0, "cpu", [NodeFigures("conv", grad_out=0.5, grad_w=0.25, weight=3.0, update_ratio=1e-3,
                                                  act_mean=0.1, act_std=1.0, zero_fraction=0.0, backward_s=1e-4),
                                      NodeFigures("relu", grad_out=0.4, act_mean=0.5, act_std=0.7, zero_fraction=0.5)])
    b = InspectReport(9, 1.0, "cpu", [NodeFigures("conv", grad_out=0.3, grad_w=0.2)])
    store.add_metrics(run, [(1, "train/loss", 2.3), *a.metric_rows(), *b.metric_rows()])
    back = reports_from_metrics(store.metrics(run))
    assert [r.step for r in back] == [5, 9]
    assert back[0].nodes == a.nodes and back[1].nodes == b.nodes
    store.close()
