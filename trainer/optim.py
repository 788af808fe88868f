"""Optimizers and the learning-rate schedule as a plain function of the step (``lr_at``).

The loop sets the rate itself each step instead of using ``torch.optim.lr_scheduler``: a pure
function is trivially resumable (the step is the whole schedule state) and, with compile on, the rate
lives in a tensor that is updated in place, so a changing rate never triggers a recompile.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .spec import OptimSpec, ScheduleSpec

FUSED = ("sgd", "adamw", "adam")   # optimizers with fused CPU and CUDA kernels (torch >= 2.4)


def make_optimizer(model: nn.Module, spec: OptimSpec, *, lr_tensor: bool = False,
                   device: torch.device | None = None, scales: dict[int, float] | None = None,
                   ) -> torch.optim.Optimizer:
    """The optimizer of the spec. Weight decay applies to weights (ndim >= 2) only, not to biases
    or normalisation scales, as is usual for convnets. ``lr_tensor`` keeps the rate in a tensor.
    ``scales`` (``id(parameter) -> factor``) puts those parameters in groups of their own whose rate
    is ``factor`` x the schedule's (:func:`set_lr`); frozen parameters (no grad) are left out."""
    scales = scales or {}
    groups: list[dict] = []
    for factor in [1.0, *sorted(set(scales.values()) - {1.0})]:
        mine = [p for p in model.parameters() if p.requires_grad and scales.get(id(p), 1.0) == factor]
        for params, wd in (([p for p in mine if p.ndim >= 2], spec.weight_decay), ([p for p in mine if p.ndim < 2], 0.0)):
            if params:
                groups.append({"params": params, "weight_decay": wd})
                if factor != 1.0:   # a tensor rate of its own: set_lr fills each group's in place
                    groups[-1].update(lr_scale=factor, **({"lr": torch.tensor(spec.lr * factor, device=device)}
                                                          if lr_tensor else {}))
    lr: float | torch.Tensor = spec.lr
    # Eager runs: the fused kernels (one launch per group for the whole update; CPU and CUDA) where
    # the optimizer has them, else foreach (one launch per group and operation).
    kw: dict = {"fused": True} if spec.name in FUSED else {"foreach": True}
    if lr_tensor:
        # For a compiled step: a tensor lr, and the whole update captured in the graph on CUDA.
        lr = torch.tensor(spec.lr, device=device)
        cuda = device is not None and device.type == "cuda"
        kw = {"foreach": cuda, "capturable": True} if cuda and spec.name != "sgd" else {"foreach": cuda}
    if spec.name == "sgd":
        return torch.optim.SGD(groups, lr=lr, momentum=spec.momentum, nesterov=spec.nesterov, **kw)
    if spec.name == "adamw":
        return torch.optim.AdamW(groups, lr=lr, betas=(spec.betas[0], spec.betas[1]), **kw)
    if spec.name == "adam":
        return torch.optim.Adam(groups, lr=lr, betas=(spec.betas[0], spec.betas[1]), **kw)
    if spec.name == "rmsprop":
        return torch.optim.RMSprop(groups, lr=lr, momentum=spec.momentum, **kw)
    raise ValueError(f"optim.name: unknown optimizer '{spec.name}'")


class Schedule:
    """``lr_at(step)`` for a peak rate, a schedule spec and the run's length in steps."""

    def __init__(self, peak: float, spec: ScheduleSpec, steps_per_epoch: int, epochs: int) -> None:
        self.peak, self.spec = peak, spec
        self.steps_per_epoch = max(steps_per_epoch, 1)
        self.total = max(self.steps_per_epoch * epochs, 1)
        self.warmup = round(spec.warmup_epochs * self.steps_per_epoch)

    def lr_at(self, step: int) -> float:
        """The rate for the optimizer step that follows ``step`` completed steps."""
        s, peak = self.spec, self.peak
        if s.name == "onecycle":
            # Cosine up from peak/25 over pct_start of the run, then cosine down to peak/1e4 (OneCycleLR).
            rise = max(round(s.pct_start * self.total), 1)
            if step < rise:
                return _cos(peak / 25.0, peak, step / rise)
            return _cos(peak, peak / 1e4, min((step - rise) / max(self.total - rise, 1), 1.0))
        if self.warmup and step < self.warmup:
            return peak * (step + 1) / self.warmup
        if s.name == "cosine":
            t = min((step - self.warmup) / max(self.total - self.warmup, 1), 1.0)
            return _cos(peak, peak * s.min_lr_ratio, t)
        if s.name == "step":
            return peak * s.gamma ** (step // self.steps_per_epoch // s.step_epochs)
        return peak


def _cos(start: float, end: float, t: float) -> float:
    """From ``start`` (t=0) to ``end`` (t=1) along half a cosine."""
    return end + (start - end) * 0.5 * (1.0 + math.cos(math.pi * t))


def set_lr(opt: torch.optim.Optimizer, lr: float) -> None:
    """Set every group's rate (times its ``lr_scale``); a tensor rate is filled in place (a device op,
    not a host sync)."""
    for group in opt.param_groups:
        rate = lr * group.get("lr_scale", 1.0)
        if isinstance(group["lr"], torch.Tensor):
            group["lr"].fill_(rate)
        else:
            group["lr"] = rate
