"""Checkpoint round trips (optimizer state through safetensors + JSON) and the lr schedules."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from trainer.checkpoints.single_file import (
    load_checkpoint_weights,
    load_optimizer,
    optimizer_tensors,
    read_checkpoint,
    restore_rng,
    rng_tensors,
    save_checkpoint,
)
from trainer.optim import Schedule, make_optimizer, set_lr
from trainer.spec import OptimSpec, ScheduleSpec


def trained(name: str, lr_tensor: bool = False) -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 3))
    opt = make_optimizer(model, OptimSpec(name=name, lr=0.01, nesterov=name == "sgd"), lr_tensor=lr_tensor,
                         device=torch.device("cpu"))
    for _ in range(3):
        loss = model(torch.randn(16, 4)).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model, opt


@pytest.mark.parametrize("name", ["sgd", "adamw", "adam", "rmsprop"])
@pytest.mark.parametrize("lr_tensor", [False, True])
def test_optimizer_state_round_trip_continues_identically(tmp_path, name, lr_tensor):
    model, opt = trained(name, lr_tensor)
    tensors, meta = optimizer_tensors(opt)
    path = save_checkpoint(tmp_path / "c.safetensors", {**{f"model.{k}": v for k, v in model.state_dict().items()},
                                                        **tensors}, {"optimizer": meta})
    saved, meta2 = read_checkpoint(path)
    model2, opt2 = trained(name, lr_tensor)
    for p in model2.parameters():
        p.data.add_(1.0)                       # differ before loading
    model2.load_state_dict(load_checkpoint_weights(path))
    load_optimizer(opt2, saved, meta2["optimizer"])
    assert isinstance(opt2.param_groups[0]["lr"], torch.Tensor) == lr_tensor
    x = torch.randn(16, 4)
    for m, o in ((model, opt), (model2, opt2)):
        loss = m(x).square().mean()
        o.zero_grad()
        loss.backward()
        o.step()
    for a, b in zip(model.parameters(), model2.parameters(), strict=True):
        assert torch.equal(a, b)


def test_rng_states_round_trip():
    gen = torch.Generator().manual_seed(3)
    state = rng_tensors(gen)
    expected = (torch.rand(3), torch.rand(3, generator=gen))
    restore_rng(state, gen)
    assert torch.equal(torch.rand(3), expected[0]) and torch.equal(torch.rand(3, generator=gen), expected[1])


def test_checkpoint_files_hold_no_pickles(tmp_path):
    model, opt = trained("adamw")
    path = save_checkpoint(tmp_path / "c.safetensors", {"model.w": model[0].weight}, {"step": 3})
    assert path.read_bytes()[8:9] == b"{"       # safetensors: a length, then a JSON header
    header = json.loads(path.read_bytes()[8:8 + int.from_bytes(path.read_bytes()[:8], "little")])
    assert json.loads(header["__metadata__"]["torch_studio"])["step"] == 3   # metadata in the same file: JSON
    assert not list(tmp_path.glob(".*.tmp"))


def schedule(name: str, **kw) -> Schedule:
    return Schedule(1.0, ScheduleSpec(name=name, **kw), steps_per_epoch=10, epochs=10)


def test_onecycle_rises_to_the_peak_then_falls():
    s = schedule("onecycle", pct_start=0.25)
    lrs = [s.lr_at(i) for i in range(100)]
    assert lrs[0] == pytest.approx(1 / 25) and max(lrs) == pytest.approx(1.0) and lrs.index(max(lrs)) == 25
    assert lrs[-1] < 1e-3 and all(a >= b for a, b in zip(lrs[25:], lrs[26:], strict=False))


def test_cosine_with_warmup_step_and_constant():
    c = schedule("cosine", warmup_epochs=1, min_lr_ratio=0.1)
    assert c.lr_at(0) == pytest.approx(0.1) and c.lr_at(9) == pytest.approx(1.0)
    assert c.lr_at(10) == pytest.approx(1.0) and c.lr_at(100) == pytest.approx(0.1)
    st = schedule("step", step_epochs=3, gamma=0.5)
    assert [st.lr_at(e * 10) for e in (0, 2, 3, 6)] == [1.0, 1.0, 0.5, 0.25]
    assert schedule("constant").lr_at(57) == 1.0


def test_set_lr_fills_a_tensor_rate_in_place():
    _, opt = trained("adamw", lr_tensor=True)
    lr = opt.param_groups[0]["lr"]
    set_lr(opt, 0.5)
    assert opt.param_groups[0]["lr"] is lr and lr.item() == 0.5


@pytest.mark.parametrize("name", ["sgd", "adamw", "rmsprop"])
def test_a_channels_last_convnets_optimizer_state_comes_back_in_its_parameters_layout(tmp_path, name):
    # A checkpoint stores tensors contiguous; the fused CUDA optimizers refuse moments whose strides
    # differ from their parameter's (an fp16 digits_cnn run failed its resume so on an H200).
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Conv2d(8, 4, 3)).to(memory_format=torch.channels_last)
    opt = make_optimizer(model, OptimSpec(name=name, lr=0.01, momentum=0.9))
    model(torch.randn(2, 3, 8, 8)).sum().backward()
    opt.step()
    tensors, meta = optimizer_tensors(opt)
    path = save_checkpoint(tmp_path / "c.safetensors", tensors, {"optimizer": meta})
    saved, meta2 = read_checkpoint(path)
    assert all(t.is_contiguous() for t in saved.values())
    opt2 = make_optimizer(model, OptimSpec(name=name, lr=0.01, momentum=0.9))
    load_optimizer(opt2, saved, meta2["optimizer"])
    weights = [p for p in model.parameters() if p.ndim == 4]
    assert weights and all(not p.is_contiguous() for p in weights)
    for p in weights:
        state = [v for v in opt2.state[p].values() if isinstance(v, torch.Tensor) and v.shape == p.shape]
        assert state and all(v.stride() == p.stride() for v in state), name
        assert all(torch.equal(v, opt.state[p][k]) for k, v in opt2.state[p].items() if isinstance(v, torch.Tensor))
