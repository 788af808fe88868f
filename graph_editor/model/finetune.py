"""A pretrained start drawn on the design: which blocks are frozen, which learn at a scaled rate, the
head replaced for other classes, and the weights the run starts from.

The plan lives in the graph file's ``metadata["finetune"]`` (data, validated when read) and becomes
the run spec's ``model.frozen``, ``model.lr_scale``, ``model.reinit`` and ``model.init_from``
(:meth:`FinetunePlan.spec_fields`), which the trainer applies (``trainer.finetune``). A block is a group
id or a node id. Edits are commands: :class:`SetPlan`, and :func:`replace_head` (the head's width,
the class count and its re-initialisation as one undo step).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .commands import Command, Macro, SetParam, SetSpec
from .errors import CommandError
from .graph import Graph

KEY = "finetune"
MAX_SCALE = 100.0           # the run spec's own limit (model.lr_scale: a factor 0 to 100)
HEAD_TYPES = ("Linear", "Conv2d")


@dataclass
class FinetunePlan:
    frozen: list[str] = field(default_factory=list)             # blocks that do not train
    lr_scale: dict[str, float] = field(default_factory=dict)    # block -> factor of the schedule's rate
    reinit: list[str] = field(default_factory=list)             # blocks left at a fresh initialisation
    init_from: str = ""                                         # the weights file the run starts from

    def is_empty(self) -> bool:
        return not (self.frozen or self.lr_scale or self.reinit or self.init_from)

    def to_metadata(self) -> dict[str, Any] | None:
        if self.is_empty():
            return None
        out: dict[str, Any] = {"frozen": list(self.frozen), "lr_scale": dict(self.lr_scale),
                               "reinit": list(self.reinit)}
        if self.init_from:
            out["init_from"] = self.init_from
        return out

    def spec_fields(self, graph: Graph) -> dict[str, Any]:
        """The run spec's fields (dotted paths) for ``graph``: blocks no longer in it are left out."""
        known = _blocks(graph)
        out: dict[str, Any] = {"model.frozen": [b for b in self.frozen if b in known],
                               "model.lr_scale": [f"{b}={f:g}" for b, f in self.lr_scale.items() if b in known],
                               "model.reinit": [b for b in self.reinit if b in known]}
        if self.init_from:     # else the run's own choice (a rerun's weights) stands
            out["model.init_from"] = self.init_from
        return out

    def node_marks(self, graph: Graph) -> dict[str, dict[str, Any]]:
        """Per node id, what the plan does to it: ``frozen`` (bool), ``lr_scale`` (float), ``reinit`` (bool);
        a block's entry reaches every node in it, a node's own entry wins over its block's."""
        marks: dict[str, dict[str, Any]] = {}
        for name, values in (("frozen", {b: True for b in self.frozen}), ("lr_scale", self.lr_scale),
                             ("reinit", {b: True for b in self.reinit})):
            for block, value in sorted(values.items(), key=lambda kv: kv[0] in graph.nodes):   # groups first
                for node in members(graph, block):
                    marks.setdefault(node, {})[name] = value
        return marks


def members(graph: Graph, block: str) -> list[str]:
    """The node ids a block entry names (a group's nodes, or the node itself); [] when it names nothing."""
    if block in graph.groups:
        return list(graph.groups[block].nodes)
    return [block] if block in graph.nodes else []


def _blocks(graph: Graph) -> set[str]:
    return set(graph.nodes) | set(graph.groups)


def plan_of(graph: Graph) -> FinetunePlan:
    """The graph's plan; a hand-edited entry of the wrong type is dropped (the file stays readable)."""
    raw = graph.metadata.get(KEY)
    if not isinstance(raw, dict):
        return FinetunePlan()
    def names(v: Any) -> list[str]:
        return [str(x) for x in v] if isinstance(v, list) else []

    scales = raw.get("lr_scale")
    scales = scales if isinstance(scales, dict) else {}
    good = {str(k): float(v) for k, v in scales.items()
            if isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v <= MAX_SCALE}
    init = raw.get("init_from")
    return FinetunePlan(names(raw.get("frozen")), good, names(raw.get("reinit")), init if isinstance(init, str) else "")


class SetPlan(Command):
    """Replace the graph's fine-tuning plan (one undo step)."""

    def __init__(self, graph: Graph, plan: FinetunePlan, text: str = "Change fine-tuning") -> None:
        for block in {*plan.frozen, *plan.lr_scale, *plan.reinit}:
            if not members(graph, block):
                raise CommandError(f"there is no block or node '{block}'", node=block if block in graph.nodes else None)
        for block, factor in plan.lr_scale.items():
            if not 0 <= factor <= MAX_SCALE:
                raise CommandError(f"the learning-rate multiplier of {block} must be 0 to {MAX_SCALE:g}, got {factor:g}",
                                   node=block if block in graph.nodes else None, field="lr_scale")
        self.graph, self.text = graph, text
        self.new, self.old = plan.to_metadata(), graph.metadata.get(KEY)

    def redo(self) -> None:
        self.graph.set_metadata(KEY, self.new)

    def undo(self) -> None:
        self.graph.set_metadata(KEY, self.old)


def set_frozen(graph: Graph, blocks: list[str], frozen: bool) -> SetPlan:
    """Freeze (or unfreeze) ``blocks``: group ids or node ids."""
    plan = plan_of(graph)
    rest = [b for b in plan.frozen if b not in blocks]
    plan.frozen = rest + list(blocks) if frozen else rest
    what = ", ".join(blocks)
    return SetPlan(graph, plan, f"{'Freeze' if frozen else 'Unfreeze'} {what}")


def set_lr_scale(graph: Graph, blocks: list[str], factor: float) -> SetPlan:
    """``blocks`` learn at ``factor`` x the schedule's rate (1 removes the multiplier)."""
    plan = plan_of(graph)
    for b in blocks:
        plan.lr_scale.pop(b, None)
        if factor != 1.0:
            plan.lr_scale[b] = float(factor)
    return SetPlan(graph, plan, f"Learning rate x{factor:g} on {', '.join(blocks)}")


def set_init_from(graph: Graph, path: str) -> SetPlan:
    plan = plan_of(graph)
    plan.init_from = path
    return SetPlan(graph, plan, "Start from weights" if path else "Start from scratch")


def head_node(graph: Graph) -> str | None:
    """The classifier: the Linear (or 1x1-conv Conv2d) nearest the Output, walking back over the layers
    between them (dropout, flatten, pooling, a softmax)."""
    seen: set[str] = set()
    todo = [e.src for o in graph.nodes_of_type("Output") for e in graph.in_edges(o.id)]
    while todo:
        node = graph.nodes[todo.pop(0)]
        if node.id in seen:
            continue
        seen.add(node.id)
        if node.type in HEAD_TYPES:
            return node.id
        todo += [e.src for e in graph.in_edges(node.id)]
    return None


def replace_head(graph: Graph, classes: int) -> Macro:
    """The head set to ``classes`` outputs, the graph's class count with it, and the head re-initialised
    when the run starts from weights (its old tensors no longer fit): one undo step."""
    head = head_node(graph)
    if head is None:
        raise CommandError("no classifier head found: a Linear layer that feeds the Output")
    if classes < 2:
        raise CommandError(f"a classifier needs at least 2 classes, got {classes}", node=head, field="out_features")
    node = graph.nodes[head]
    width = "out_channels" if node.type == "Conv2d" else "out_features"
    plan = plan_of(graph)
    plan.reinit = [b for b in plan.reinit if b != head] + [head]
    plan.frozen = [b for b in plan.frozen if b != head]
    return Macro(f"Replace head {head} ({classes} classes)", [
        SetParam(graph, head, width, classes), SetSpec(graph, graph.input_spec, classes), SetPlan(graph, plan)])


__all__ = ["KEY", "FinetunePlan", "SetPlan", "head_node", "members", "plan_of", "replace_head", "set_frozen",
           "set_init_from", "set_lr_scale"]
