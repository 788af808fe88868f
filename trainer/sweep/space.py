"""A sweep's search space: ``lr=1e-4..3e-2:log,batch_size=32|64|128,node.conv1.out_channels=16..64:step16``.

Each comma-separated token is ``NAME=RANGE``. NAME is a run-spec field (its dotted path, e.g.
``optim.momentum``, or a short name: :data:`ALIASES`) or a graph node's parameter
(``node.<id>.<param>``) or a block's repeat count (``block.<group id>.repeat``). RANGE is ``LOW..HIGH`` (a number range; ``:log`` samples it log-uniformly,
``:stepN`` on a grid of N) or ``A|B|C`` (a choice). Every value a trial can draw is checked when the
space is parsed (the range's ends, each choice), through the same checks a run spec or a graph file
gets, so a bad space fails before any trial starts: :class:`SpaceError` names the token at fault.
"""

from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass
from typing import Any

from graph_editor.model import Graph, validate
from graph_editor.model.errors import ParamError
from graph_editor.model.repeat import repeat_problem, unrolled

from ..spec import RunSpec, SpecError, spec_from_dict

ALIASES = {
    "lr": "optim.lr", "weight_decay": "optim.weight_decay", "optimizer": "optim.name",
    "momentum": "optim.momentum", "label_smoothing": "optim.label_smoothing",
    "batch_size": "train.batch_size", "epochs": "train.epochs", "seed": "train.seed",
    "schedule": "schedule.name", "precision": "precision.dtype",
    "flip": "data.augment.flip", "translate": "data.augment.translate",
    "augment.flip": "data.augment.flip", "augment.translate": "data.augment.translate",
}
MAX_TOKENS = 64
NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
RANGE_RE = re.compile(rf"({NUMBER})\.\.({NUMBER})(?::(log|step({NUMBER})))?")
NODE_PREFIX = "node."
BLOCK_PREFIX = "block."     # block.<group id>.repeat: how many times a block repeats


class SpaceError(ValueError):
    """A search space that cannot be searched; the message names the token at fault."""


@dataclass(frozen=True)
class Dimension:
    """One searched value: where it goes (``spec`` path or ``node`` id + param) and what it may be."""

    name: str                       # as the user wrote it (the trial's parameter name)
    target: str                     # "spec", "node" or "block"
    path: str                       # spec: "optim.lr"; node: "conv1.out_channels"; block: "layer1.repeat"
    kind: str                       # "float", "int" or "choice"
    low: float = 0.0
    high: float = 0.0
    log: bool = False
    step: float | None = None
    choices: tuple[Any, ...] = ()

    def suggest(self, trial: Any) -> Any:
        """Draw this dimension's value for an Optuna trial."""
        if self.kind == "choice":
            return trial.suggest_categorical(self.name, list(self.choices))
        if self.kind == "int":
            return trial.suggest_int(self.name, int(self.low), int(self.high), step=int(self.step or 1), log=self.log)
        return trial.suggest_float(self.name, self.low, self.high, step=self.step, log=self.log)

    def extremes(self) -> list[Any]:
        """The values that, if they pass the checks, make every draw pass (each choice, both ends)."""
        if self.kind == "choice":
            return list(self.choices)
        cast = int if self.kind == "int" else float
        return [cast(self.low), cast(self.high)]


@dataclass(frozen=True)
class Space:
    dimensions: tuple[Dimension, ...]

    def suggest(self, trial: Any) -> dict[str, Any]:
        return {d.name: d.suggest(trial) for d in self.dimensions}

    def apply(self, spec: dict[str, Any], graph: dict[str, Any], params: dict[str, Any]) -> tuple[
            dict[str, Any], dict[str, Any]]:
        """Copies of a spec dict and a graph dict with ``params`` (a trial's draw) put in place."""
        spec, graph = copy.deepcopy(spec), copy.deepcopy(graph)
        for d in self.dimensions:
            if d.name in params:
                _put(spec, graph, d, params[d.name])
        return spec, graph


def parse_space(text: str, *, graph: Graph | None = None, base_spec: dict[str, Any] | None = None) -> Space:
    """Parse and check a space; ``graph`` checks the ``node.`` dimensions, ``base_spec`` (a spec dict)
    is what the spec dimensions are checked against (default: the defaults)."""
    tokens = [t.strip() for t in text.split(",")]
    if not text.strip():
        raise SpaceError("space: empty (give NAME=LOW..HIGH or NAME=A|B, separated by commas)")
    if len(tokens) > MAX_TOKENS:
        raise SpaceError(f"space: {len(tokens)} tokens, at most {MAX_TOKENS}")
    dims: list[Dimension] = []
    for i, token in enumerate(tokens, 1):
        where = f"space token {i} '{_cut(token)}'"
        dim = _parse_token(token, where, graph)
        if any(d.name == dim.name or (d.target, d.path) == (dim.target, dim.path) for d in dims):
            raise SpaceError(f"{where}: {dim.name} is searched twice")
        _check_values(dim, where, graph, base_spec or {})
        dims.append(dim)
    return Space(tuple(dims))


def _parse_token(token: str, where: str, graph: Graph | None) -> Dimension:
    name, eq, rng = token.partition("=")
    name, rng = name.strip(), rng.strip()
    if not eq or not name or not rng:
        raise SpaceError(f"{where}: expected NAME=LOW..HIGH or NAME=A|B|C")
    target, path, default = _target(name, where, graph)
    if "|" in rng:
        return Dimension(name, target, path, "choice", choices=_choices(rng, default, where))
    m = RANGE_RE.fullmatch(rng)
    if m is None:
        raise SpaceError(f"{where}: '{_cut(rng)}' is neither LOW..HIGH[:log|:stepN] nor a choice A|B|C")
    if isinstance(default, bool) or not isinstance(default, int | float):
        raise SpaceError(f"{where}: {name} is not a number; give its choices as A|B|C")
    low, high = float(m.group(1)), float(m.group(2))
    log, step = m.group(3) == "log", float(m.group(4)) if m.group(4) else None
    integer = isinstance(default, int)
    if not (math.isfinite(low) and math.isfinite(high)) or low >= high:
        raise SpaceError(f"{where}: the range must go from a lower to a higher finite number")
    if log and low <= 0:
        raise SpaceError(f"{where}: a :log range must be above 0")
    if step is not None and (step <= 0 or step > high - low):
        raise SpaceError(f"{where}: :step{m.group(4)} must be above 0 and at most the range's width")
    if integer and any(v != int(v) for v in (low, high, step or 1)):
        raise SpaceError(f"{where}: {name} takes integers; its range and step must be whole numbers")
    return Dimension(name, target, path, "int" if integer else "float", low, high, log, step)


def _target(name: str, where: str, graph: Graph | None) -> tuple[str, str, Any]:
    """("spec", "optim.lr", its default), ("node", "conv1.out_channels", its current value) or
    ("block", "layer1.repeat", its current count)."""
    if name.startswith(BLOCK_PREFIX):
        return _block_target(name, where, graph)
    if name.startswith(NODE_PREFIX):
        node_id, _, param = name[len(NODE_PREFIX):].rpartition(".")
        if not node_id or not param:
            raise SpaceError(f"{where}: a node parameter is node.<id>.<param>")
        if graph is None:
            raise SpaceError(f"{where}: node parameters need the graph")
        if node_id not in graph:
            raise SpaceError(f"{where}: the graph has no node '{_cut(node_id)}'")
        spec = graph.node(node_id).spec
        if spec is None or not spec.has_param(param):
            raise SpaceError(f"{where}: node {node_id} ({graph.node(node_id).type}) has no parameter '{_cut(param)}'")
        value = graph.node(node_id).params.get(param, spec.param(param).default)
        return "node", f"{node_id}.{param}", value
    path = ALIASES.get(name, name)
    obj: Any = RunSpec()
    for part in path.split("."):
        if part == "base_dir" or not hasattr(obj, part):
            known = ", ".join(sorted(ALIASES))
            raise SpaceError(f"{where}: unknown name '{_cut(name)}' (a run-spec field such as optim.momentum, "
                             f"node.<id>.<param>, or one of {known})")
        obj = getattr(obj, part)
    if isinstance(obj, list | dict) or hasattr(obj, "__dataclass_fields__"):
        raise SpaceError(f"{where}: {name} is not a single value and cannot be searched")
    return "spec", path, obj


def _block_target(name: str, where: str, graph: Graph | None) -> tuple[str, str, Any]:
    group_id, _, param = name[len(BLOCK_PREFIX):].rpartition(".")
    if not group_id or param != "repeat":
        raise SpaceError(f"{where}: a block's repeat count is block.<group id>.repeat")
    if graph is None:
        raise SpaceError(f"{where}: block repeat counts need the graph")
    if group_id not in graph.groups:
        raise SpaceError(f"{where}: the graph has no block '{_cut(group_id)}'")
    return "block", f"{group_id}.repeat", graph.groups[group_id].repeat


def _choices(rng: str, default: Any, where: str) -> tuple[Any, ...]:
    out: list[Any] = []
    for raw in rng.split("|"):
        raw = raw.strip()
        if not raw:
            raise SpaceError(f"{where}: an empty choice")
        out.append(_typed(raw, default, where))
    if len(set(map(repr, out))) != len(out):
        raise SpaceError(f"{where}: a choice is listed twice")
    return tuple(out)


def _typed(raw: str, default: Any, where: str) -> Any:
    """A choice as the field's type: true/false, an integer, a number, or a word."""
    if isinstance(default, bool):
        if raw.lower() not in ("true", "false"):
            raise SpaceError(f"{where}: '{_cut(raw)}' is not true or false")
        return raw.lower() == "true"
    if isinstance(default, int | float) or default is None and re.fullmatch(NUMBER, raw):
        if not re.fullmatch(NUMBER, raw):
            raise SpaceError(f"{where}: '{_cut(raw)}' is not a number")
        value = float(raw)
        if isinstance(default, int) and value != int(value):
            raise SpaceError(f"{where}: '{_cut(raw)}' is not an integer")
        return int(value) if isinstance(default, int) or value == int(value) and "." not in raw else value
    return raw


def _check_values(dim: Dimension, where: str, graph: Graph | None, base: dict[str, Any]) -> None:
    """Put every extreme value through the run spec's or the layer's own checks."""
    for value in dim.extremes():
        if dim.target == "block":
            assert graph is not None
            _check_block(dim, value, where, graph)
            continue
        if dim.target == "node":
            assert graph is not None
            node_id, _, param = dim.path.rpartition(".")
            spec = graph.node(node_id).spec
            try:
                spec.param(param).check(value)  # type: ignore[union-attr]
            except ParamError as exc:
                raise SpaceError(f"{where}: {value!r} is refused by node {node_id}: {exc}") from None
            trial_graph = graph.copy()
            trial_graph.nodes[node_id].params[param] = value
            errors = [p for p in validate(trial_graph).problems if p.severity == "error"]
            if errors:
                raise SpaceError(f"{where}: with {value!r} the graph does not work: {errors[0]}")
            continue
        trial = copy.deepcopy(base)
        _put(trial, {}, dim, value)
        try:
            spec_from_dict(trial)
        except SpecError as exc:
            raise SpaceError(f"{where}: {value!r} is refused: {'; '.join(exc.problems)}") from None


def _check_block(dim: Dimension, value: Any, where: str, graph: Graph) -> None:
    """The block can repeat ``value`` times, and the graph with it built out still works."""
    group_id = dim.path.rpartition(".")[0]
    problem = repeat_problem(graph, group_id, value) if isinstance(value, int) else f"{value!r} is not a count"
    if problem is not None:
        raise SpaceError(f"{where}: {problem}")
    trial_graph = graph.copy()
    trial_graph.groups[group_id].repeat = value
    errors = [p for p in validate(unrolled(trial_graph)).problems if p.severity == "error"]
    if errors:
        raise SpaceError(f"{where}: with block {group_id} repeated {value} times the graph does not work: {errors[0]}")


def _put(spec: dict[str, Any], graph: dict[str, Any], dim: Dimension, value: Any) -> None:
    if dim.target == "block":
        group_id = dim.path.rpartition(".")[0]
        for group in graph.get("groups", []):
            if group.get("id") == group_id:
                group["repeat"] = value
                return
        raise SpaceError(f"{dim.name}: the graph has no block '{group_id}'")
    if dim.target == "node":
        node_id, _, param = dim.path.rpartition(".")
        for node in graph.get("nodes", []):
            if node.get("id") == node_id:
                node.setdefault("params", {})[param] = value
                return
        raise SpaceError(f"{dim.name}: the graph has no node '{node_id}'")
    *parents, leaf = dim.path.split(".")
    at = spec
    for part in parents:
        at = at.setdefault(part, {})
    at[leaf] = value


def _cut(text: str, n: int = 40) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."
