"""Per-node analysis without real memory: output shape, parameters, FLOPs, activation bytes.

Shapes come from the catalog's shape rules; parameter counts from building each module on
the ``meta`` device (cached per layer configuration, so a live edit rebuilds one node);
FLOPs from the formulas that ``torch.utils.flop_counter`` uses (a multiply-add counts 2),
applied to the inferred shapes. A test checks the figures against ``FlopCounterMode`` on
every template.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any

import torch

from ..building.fx import BuildError, unrolled_for_build
from ..building.modules import NO_MODULE, get_builder
from ..model import Graph, Inference, Problem, fmt_shape, validate
from ..model.finetune import plan_of
from ..model.registry import Registry
from ..model.units import count, nbytes

Shape = tuple[int, ...]
FlopRule = Callable[[dict[str, Any], list[Shape], Shape], int]
_FLOPS: Registry[str, FlopRule] = Registry("a FLOP rule")

_ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "int64": 8}


@dataclass
class NodeStats:
    id: str
    type: str
    shape: Shape  # output shape, batch first
    params: int
    trainable: int
    flops: int
    activation_bytes: int


@dataclass
class Analysis:
    """The summary table of a graph at one batch size."""

    batch: int
    nodes: list[NodeStats]
    input_shape: Shape
    output_shape: Shape
    problems: list[Problem] = field(default_factory=list)

    @property
    def total_params(self) -> int:
        return sum(n.params for n in self.nodes)

    @property
    def trainable_params(self) -> int:
        return sum(n.trainable for n in self.nodes)

    @property
    def total_flops(self) -> int:
        return sum(n.flops for n in self.nodes)

    @property
    def activation_bytes(self) -> int:
        return sum(n.activation_bytes for n in self.nodes)

    def by_id(self) -> dict[str, NodeStats]:
        return {n.id: n for n in self.nodes}

    def to_dict(self) -> dict[str, Any]:
        return {
            "batch": self.batch,
            "input_shape": list(self.input_shape),
            "output_shape": list(self.output_shape),
            "total_params": self.total_params,
            "trainable_params": self.trainable_params,
            "total_flops": self.total_flops,
            "activation_bytes": self.activation_bytes,
            "nodes": [{**asdict(n), "shape": list(n.shape)} for n in self.nodes],
            "warnings": [str(p) for p in self.problems if p.severity != "error"],
        }


def analyze(graph: Graph, batch: int = 1, inference: Inference | None = None) -> Analysis:
    """Analyse ``graph`` at ``batch``; raises :class:`BuildError` when it does not validate.
    ``inference``: the graph's own validation at ``batch``, when the caller has it (the live analysis
    validated just before: a second validation was a third of opening a 20,000-node graph). Repeated
    blocks count every copy (``conv_r2``...)."""
    graph, inference = unrolled_for_build(graph, inference)
    inf = validate(graph, batch) if inference is None else inference
    if not inf.ok:
        raise BuildError(inf.problems)
    itemsize = _ITEMSIZE.get(graph.input_spec.dtype, 4)
    frozen = {n for n, m in plan_of(graph).node_marks(graph).items() if m.get("frozen")}   # do not train
    stats: list[NodeStats] = []
    out_shape: Shape = ()
    for node_id in inf.order:
        node = graph.nodes[node_id]
        shape = inf.shapes[node_id]
        if node.type == "Output":
            out_shape = shape
            continue
        in_shapes = [s for e in inf.in_edges[node_id] if (s := inf.edge_shape(e)) is not None]
        params = inf.params[node_id]
        try:
            n_params, n_train = (0, 0) if node.type in NO_MODULE else param_count(node.type, params, in_shapes)
            n_train = 0 if node_id in frozen else n_train
        except (ValueError, RuntimeError, TypeError) as exc:  # torch's refusal, e.g. weights past int64 bytes
            raise BuildError([Problem(node_id, f"PyTorch refuses this {node.type}: {exc}")]) from None
        rule = _FLOPS.get(node.type)
        flops = rule(params, in_shapes, shape) if rule else 0
        numel = sum(math.prod(s) for s in inf.port_shapes.get(node_id, [shape]))  # every output of a Split
        # Layers compute in float32 (the trainer's autocast is accounted for by the memory model).
        act_itemsize = itemsize if node.type == "Input" else 4
        stats.append(NodeStats(node_id, node.type, shape, n_params, n_train, flops, numel * act_itemsize))
    return Analysis(batch, stats, (batch, *graph.input_spec.shape), out_shape, inf.problems)


def param_count(type_: str, params: dict[str, Any], in_shapes: list[Shape]) -> tuple[int, int]:
    """(all, trainable) parameters of one layer, from its module built on ``meta``."""
    key = json.dumps([type_, params, in_shapes], sort_keys=True)
    return _param_count(key)


@lru_cache(maxsize=4096)
def _param_count(key: str) -> tuple[int, int]:
    type_, params, in_shapes = json.loads(key)
    make = get_builder(type_)
    if make is None:
        return 0, 0
    with torch.device("meta"):
        module = make(params, [tuple(s) for s in in_shapes])
    total = sum(p.numel() for p in module.parameters())
    trainable = sum(p.numel() for p in module.parameters() if p.requires_grad)
    return total, trainable


# ---------------------------------------------------------------- FLOP rules
def flop_rule(*types: str) -> Callable[[FlopRule], FlopRule]:
    """Decorator: ``fn(params, input_shapes, output_shape) -> FLOPs`` for the layer types ``types``.

    The rules live with their layer family in :mod:`graph_editor.building.ops`; each counts what
    ``torch.utils.flop_counter`` counts (matrix products, convolutions, attention; a multiply-add is 2).
    """
    def deco(fn: FlopRule) -> FlopRule:
        return _FLOPS.add_all(types, fn)
    return deco


def zero_flops(*types: str) -> None:
    """Declare that ``types`` do no work ``FlopCounterMode`` counts (element-wise ops, reshapes)."""
    _FLOPS.add_all(types, _no_flops)


def _no_flops(p: dict[str, Any], xs: list[Shape], out: Shape) -> int:
    return 0


def flop_types() -> set[str]:
    """Every layer type with a FLOP rule (a declared zero included)."""
    return set(_FLOPS)


def matmul_flops(rows: int, inner: int, cols: int) -> int:
    """FLOPs of a (rows x inner) @ (inner x cols) product."""
    return 2 * rows * inner * cols


def leading_rows(shape: Shape) -> int:
    """How many rows a layer over the last dimension processes: the product of all other dims."""
    n = 1
    for d in shape[:-1]:
        n *= d
    return n


def summary_table(a: Analysis) -> str:
    """The per-node table the CLI prints."""
    rows = [("node", "type", "output", "params", "FLOPs", "activations")]
    for n in a.nodes:
        rows.append((n.id, n.type, fmt_shape(n.shape), f"{n.params:,}", count(n.flops),
                     nbytes(n.activation_bytes)))
    widths = [max(len(r[i]) for r in rows) for i in range(6)]
    lines = ["  ".join(c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
             for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    lines.append("-" * len(lines[0]))
    lines.append(f"total params {a.total_params:,} (trainable {a.trainable_params:,}), "
                 f"FLOPs {count(a.total_flops)} per batch of {a.batch}, "
                 f"activations {nbytes(a.activation_bytes)}, output {fmt_shape(a.output_shape)}")
    return "\n".join(lines)
