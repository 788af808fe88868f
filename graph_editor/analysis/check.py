"""One verdict on a graph: what ``torch-studio validate`` prints is what the studio's Problems panel lists.

:func:`check_graph` runs the graph's own checks (:func:`graph_editor.model.validate`), then the build
every command makes, on the ``meta`` device (no memory): node ids PyTorch modules reserve, a Module
node whose class cannot be imported from here, a layer PyTorch itself refuses. A graph of a billion
parameters or more gets a warning that says how large it is. Then the per-layer analysis.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..building.fx import BuildError, build_parts
from ..model import Graph, Inference, Problem, validate
from .per_node import Analysis, analyze

BIG_MODEL = 10 ** 9   # parameters: the check says how large such a model is


@dataclass
class GraphCheck:
    """The graph's validation, every problem found (its own, the build's, the size warning) and its
    analysis (None when it does not build)."""

    inference: Inference
    problems: list[Problem]
    analysis: Analysis | None

    @property
    def ok(self) -> bool:
        return not any(p.severity == "error" for p in self.problems)


def check_graph(graph: Graph, batch: int = 1, inference: Inference | None = None) -> GraphCheck:
    """Validate, build on ``meta`` and analyse ``graph``; ``inference``: its validation at ``batch``, when
    the caller has it."""
    inf = validate(graph, batch) if inference is None else inference
    problems = list(inf.problems)
    if not inf.ok:
        return GraphCheck(inf, problems, None)
    try:
        module, _, _ = build_parts(graph, batch=batch, device="meta", inference=inf)   # no GraphModule: see there
        analysis = analyze(graph, batch, inf)
    except BuildError as exc:
        return GraphCheck(inf, problems + [p for p in exc.problems if p not in problems], None)
    counts = {name: sum(p.numel() for p in child.parameters()) for name, child in module.named_children()}
    return GraphCheck(inf, problems + size_warning(counts), analysis)


def size_warning(counts: dict[str, int]) -> list[Problem]:
    """A warning on a model of :data:`BIG_MODEL` parameters or more (``counts``: per node), on its
    largest node: how many, and the bytes its weights and an AdamW training of them take."""
    total = sum(counts.values())
    if total < BIG_MODEL:
        return []
    biggest = max(counts, key=lambda k: counts[k])
    return [Problem(biggest, f"the graph has {total / 1e9:,.1f} billion parameters ({biggest}: "
                             f"{counts[biggest] / 1e9:,.1f} billion): {_gib(4 * total)} of float32 weights, "
                             f"{_gib(16 * total)} to train with AdamW (weights, gradients and two moments) "
                             "before any activation; a device that cannot hold them refuses the run",
                    severity="warning")]


def _gib(n: int) -> str:
    return f"{n / 2**30:,.2f} GiB"
