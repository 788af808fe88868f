"""A pretrained start: weights loaded from a file, layers re-initialised (a replaced head), blocks frozen,
and per-block learning-rate multipliers (``model.init_from``, ``model.reinit``, ``model.frozen``,
``model.lr_scale`` in the run spec).

* ``init_from``: a weights file keyed by the graph's node ids (``conv1.weight``): a run's checkpoint
  (``model.`` keys), a safetensors export, or a ``torch.save``d state dict (read with
  ``weights_only=True``: nothing in the file runs). Tensors whose shape differs from the graph's (a
  head set to other classes) keep their fresh initialisation, as the ``reinit`` layers do.
* ``frozen``: group ids, node ids or ``first..last`` node ranges whose parameters do not train; their BatchNorm
  layers stay in eval mode (running statistics kept, as fine-tuning a frozen backbone needs), whatever
  ``model.train()`` the loop calls.
* ``lr_scale``: ``"block=factor"`` entries; the block's parameters learn at ``factor`` x the schedule's
  rate (e.g. ``backbone=0.1``), through their own optimizer groups (:func:`trainer.optim.set_lr`).
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from graph_editor.model import Graph

from .memory.recomputation import SegmentError, resolve_segments
from .spec import ModelSpec, RunSpec, SpecError

BN = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)


@dataclass
class InitReport:
    loaded: list[str] = field(default_factory=list)      # tensors taken from the file
    fresh: list[str] = field(default_factory=list)       # left at their initialisation (reinit, shape, absent)


def read_weights(path: Path) -> dict[str, torch.Tensor]:
    """A weights file's tensors by name (``model.`` prefixes of a run's checkpoint removed)."""
    from graph_editor.importer.pretrained import load_tensors

    tensors = load_tensors(path)
    if any(k.startswith("model.") for k in tensors):
        tensors = {k.removeprefix("model."): v for k, v in tensors.items() if k.startswith("model.")}
    return tensors


def node_ids(graph: Graph, entries: list[str], where: str) -> list[list[str]]:
    """Each entry's node ids: a group id, a ``first..last`` range, or one node id."""
    order = [n.id for n in graph]
    known = set(order)
    entries = [f"{e}..{e}" if e in known and e not in graph.groups else e for e in entries]
    try:
        return resolve_segments(graph, order, entries, where)
    except SegmentError as exc:
        raise SpecError([str(exc)]) from None


def initialise(model: nn.Module, graph: Graph, spec: RunSpec) -> InitReport:
    """Load ``model.init_from`` into ``model`` (but the ``reinit`` layers and tensors of another shape)."""
    m = spec.model
    report = InitReport()
    if not m.init_from:
        return report
    path = spec.resolve(m.init_from)
    try:
        weights = read_weights(path)
    except (OSError, ValueError, RuntimeError) as exc:
        raise SpecError([f"model.init_from: cannot read {path}: {str(exc).splitlines()[0][:200]}"]) from None
    reinit = {n for seg in node_ids(graph, m.reinit, "model.reinit") for n in seg}
    state = model.state_dict()
    take = {}
    for name, value in state.items():
        node = name.split(".")[0]
        source = weights.get(name)
        if node in reinit or source is None or source.shape != value.shape:
            report.fresh.append(name)
        else:
            take[name] = source.to(value.dtype)
    if not take:
        raise SpecError([f"model.init_from: no tensor of {path} fits the graph's layers (names are node ids, "
                         f"e.g. {next(iter(state), 'conv1.weight')})"])
    model.load_state_dict(take, strict=False)
    report.loaded = sorted(take)
    return report


def freeze(model: nn.Module, graph: Graph, m: ModelSpec) -> list[str]:
    """Stop the ``frozen`` blocks' parameters training and keep their BatchNorm layers in eval mode;
    the frozen node ids."""
    frozen = [n for seg in node_ids(graph, m.frozen, "model.frozen") for n in seg]
    modules = dict(model.named_modules())
    for node in frozen:
        module = modules.get(node)
        if module is None:
            continue
        for p in module.parameters():
            p.requires_grad_(False)
        for sub in module.modules():
            if isinstance(sub, BN):
                sub.train = types.MethodType(_always_eval, sub)  # type: ignore[method-assign]  # model.train() calls it
                sub.eval()
    return frozen


def _always_eval(self: nn.Module, mode: bool = True) -> nn.Module:
    return nn.Module.train(self, False)


def lr_scales(model: nn.Module, graph: Graph, m: ModelSpec) -> dict[int, float]:
    """``id(parameter) -> factor`` for the parameters of each ``lr_scale`` block."""
    entries = [e.partition("=") for e in m.lr_scale]
    blocks = node_ids(graph, [name.strip() for name, _, _ in entries], "model.lr_scale")
    modules = dict(model.named_modules())
    out: dict[int, float] = {}
    for (_, _, factor), nodes in zip(entries, blocks, strict=True):
        for node in nodes:
            if node in modules:
                out.update({id(p): float(factor) for p in modules[node].parameters()})
    return out
