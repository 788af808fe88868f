"""Live inspection: one training step run with hooks, measured per graph node.

On request (the ``inspect`` command) or every ``inspect_every_s`` seconds, the next batch's step is
run by :func:`inspected_step` instead of the usual one: the same forward, loss, backward and
optimizer step, on the *eager* model (a compiled model's backward is one opaque node and its hooks
would be traced into the graph), with hooks on each top-level submodule (= graph node). Per node:

- ``grad_out``: ||dL/dy||, the gradient norm into its output (a tensor hook on the output);
- ``grad_w``: ||dL/dW|| over its parameters; ``weight``: ||W||; ``update_ratio``: ||W' - W|| / ||W||
  across the optimizer step (lr, momentum and weight decay included);
- ``act_mean``, ``act_std``, ``zero_fraction`` (exact zeros of its output: dead ReLUs);
- ``backward_s``: CPU time of its autograd nodes (node pre-hooks and hooks); None on CUDA, whose
  kernels are asynchronous.

Cost: hooks, a copy of the weights for the update ratio, a few reductions per node, and one
host/device sync for all figures at the end of the step. Inspected every 2 s, digits_cnn trains
within a few percent of its usual throughput (``benchmarks/inspect_cost.py``). The report is written
to a JSON file in the run directory by :class:`LiveInspection`'s publisher; the event carries its path.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import nn

from .callbacks import Callback
from .loop import StepFn, autocast
from .protocol.wire import json_safe

if TYPE_CHECKING:
    from .protocol.events import Event

VANISHING = 1e-7   # a gradient norm below this is flagged as vanishing
EXPLODING = 1e3    # a gradient norm above this (or not finite) is flagged as exploding
FIGURES = ("grad_out", "grad_w", "weight", "update_ratio", "act_mean", "act_std", "zero_fraction", "backward_s")


@dataclass
class NodeFigures:
    """One graph node's figures at an inspected step (None where a figure does not apply)."""

    node: str
    grad_out: float | None = None
    grad_w: float | None = None
    weight: float | None = None
    update_ratio: float | None = None
    act_mean: float | None = None
    act_std: float | None = None
    zero_fraction: float | None = None
    backward_s: float | None = None


@dataclass
class InspectReport:
    """Every graph node's figures at one step, in network (forward) order."""

    step: int
    loss: float | None
    device: str
    nodes: list[NodeFigures] = field(default_factory=list)
    seconds: float = 0.0  # wall time of the inspected step, hooks and the sync included

    def by_node(self) -> dict[str, NodeFigures]:
        return {n.node: n for n in self.nodes}

    def flags(self, vanishing: float = VANISHING, exploding: float = EXPLODING) -> list[tuple[str, str, str, float]]:
        """(node, 'vanishing' | 'exploding', figure, value) for each gradient norm out of range."""
        out = []
        for n in self.nodes:
            for name in ("grad_out", "grad_w"):
                value = getattr(n, name)
                if value is None:
                    continue
                if not math.isfinite(value) or value > exploding:
                    out.append((n.node, "exploding", name, value))
                elif value < vanishing:
                    out.append((n.node, "vanishing", name, value))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "loss": _finite(self.loss), "device": self.device, "seconds": self.seconds,
                "nodes": [{k: _finite(v) for k, v in asdict(n).items()} for n in self.nodes]}

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> InspectReport:
        names = {f.name for f in fields(NodeFigures)}
        nodes = [NodeFigures(**{k: v for k, v in n.items() if k in names}) for n in obj.get("nodes", [])]
        return cls(int(obj["step"]), obj.get("loss"), str(obj.get("device", "")), nodes,
                   float(obj.get("seconds", 0.0)))

    def metric_rows(self) -> list[tuple[int, str, float | None]]:
        """The figures as run-store metric rows, ``inspect/<figure>/<node>``, for a finished run's history."""
        return [(self.step, f"inspect/{name}/{n.node}", _finite(getattr(n, name)))
                for n in self.nodes for name in FIGURES if getattr(n, name) is not None]


def _finite(value: Any) -> Any:
    """JSON has no inf/NaN: an exploded figure is written as +-1e308, so its direction shows (NaN as None,
    as everywhere on the wire: :func:`~trainer.protocol.wire.json_safe`)."""
    if isinstance(value, float) and math.isinf(value):
        return math.copysign(1e308, value)
    return json_safe(value)


class _Hooks:
    """Forward hooks on every top-level child; the figures stay device tensors until :meth:`read`."""

    def __init__(self, model: nn.Module, timed: bool) -> None:
        self.children = list(model.named_children())
        self.timed = timed
        self.stats: dict[str, torch.Tensor] = {}     # node -> [mean, std, zero fraction]
        self.grads: dict[str, torch.Tensor] = {}     # node -> ||dL/dy||
        self.owner: dict[Any, str] = {}              # autograd node -> graph node
        self.started: dict[Any, float] = {}
        self.backward_s: dict[str, float] = {}
        self.order: list[str] = []
        self.handles: list[Any] = []

    def __enter__(self) -> _Hooks:
        self.handles = [child.register_forward_hook(self._forward(name)) for name, child in self.children]
        return self

    def __exit__(self, *exc: object) -> None:
        for h in self.handles:
            h.remove()

    def _forward(self, name: str) -> Callable[..., None]:
        def hook(_mod: nn.Module, _args: Any, out: Any) -> None:
            if not isinstance(out, torch.Tensor) or not out.is_floating_point():
                return
            self.order.append(name)
            y = out.detach().float()
            self.stats[name] = torch.stack([y.mean(), y.std() if y.numel() > 1 else y.new_zeros(()),
                                            (y == 0).float().mean()])
            if out.requires_grad:
                out.register_hook(lambda g, name=name: self.grads.__setitem__(name, g.detach().float().norm()))
                if self.timed:
                    self._claim(name, out.grad_fn)
        return hook

    def _claim(self, name: str, root: Any) -> None:
        """Time the autograd nodes this module's forward made (reachable from its output, unclaimed)."""
        stack = [root]
        while stack:
            fn = stack.pop()
            if fn is None or fn in self.owner:
                continue
            self.owner[fn] = name
            fn.register_prehook(lambda _g, fn=fn: self.started.__setitem__(fn, time.perf_counter()))
            fn.register_hook(lambda _gi, _go, fn=fn: self._stopped(fn))
            stack.extend(n for n, _ in fn.next_functions)

    def _stopped(self, fn: Any) -> None:
        t0 = self.started.pop(fn, None)
        if t0 is not None:
            name = self.owner[fn]
            self.backward_s[name] = self.backward_s.get(name, 0.0) + time.perf_counter() - t0


def inspected_step(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor, *, step: int,
                   device: torch.device, precision: str, label_smoothing: float = 0.0,
                   scaler: torch.amp.GradScaler | None = None) -> tuple[torch.Tensor, torch.Tensor, InspectReport]:
    """One training step of the eager ``model`` (as the loop's ``train_step`` does it), measured per
    top-level submodule. Returns (loss, predictions) as device tensors, as a step does, and the report."""
    t0 = time.perf_counter()
    params = {name: [p for p in child.parameters() if p.requires_grad] for name, child in model.named_children()}
    flat = [p for ps in params.values() for p in ps]
    opt.zero_grad(set_to_none=True)   # before the forward, as the loop's step: no old gradients through it
    with _Hooks(model, timed=device.type == "cpu") as hooks:
        with autocast(device, precision):
            logits = model(x)
            loss = F.cross_entropy(logits, y, label_smoothing=label_smoothing)
        (scaler.scale(loss) if scaler is not None else loss).backward()
    if scaler is not None:
        scaler.unscale_(opt)  # the figures are of the true gradients; step() does not unscale twice
    zero = torch.zeros((), device=device)
    grad_norms = _norms([p.grad if p.grad is not None else torch.zeros_like(p) for p in flat])
    before = [p.detach().clone() for p in flat]
    if scaler is not None:
        scaler.step(opt)
        scaler.update()
    else:
        opt.step()
    with torch.no_grad():
        weight_norms = _norms(before)
        update_norms = _norms(torch._foreach_sub([p.detach() for p in flat], before) if flat else [])
    rows, names, i = [], [], 0
    for name, ps in params.items():
        k = len(ps)
        per = [_combine(grad_norms[i:i + k]), _combine(weight_norms[i:i + k]), _combine(update_norms[i:i + k])] \
            if k else [zero, zero, zero]
        i += k
        stats = hooks.stats.get(name, torch.full((3,), float("nan"), device=device))
        rows.append(torch.cat([torch.stack([hooks.grads.get(name, torch.full((), float("nan"), device=device)),
                                            *per]), stats]))
        names.append(name)
    table = torch.stack(rows).cpu().tolist() if rows else []   # the one host/device sync
    loss_value = float(loss.detach().float().cpu())
    forward = set(hooks.order)
    nodes = []
    for name, (g_out, g_w, w, upd, mean, std, zeros) in zip(names, table, strict=True):
        has_params = bool(params[name])
        nodes.append(NodeFigures(
            name,
            grad_out=g_out if not math.isnan(g_out) else None,
            grad_w=g_w if has_params else None,
            weight=w if has_params else None,
            update_ratio=upd / w if has_params and w > 0 else None,
            act_mean=mean if name in forward else None, act_std=std if name in forward else None,
            zero_fraction=zeros if name in forward else None,
            backward_s=hooks.backward_s.get(name) if hooks.timed else None))
    order = {n: j for j, n in enumerate(hooks.order)}
    nodes.sort(key=lambda n: order.get(n.node, len(order)))
    report = InspectReport(step, loss_value, str(device), nodes, round(time.perf_counter() - t0, 6))
    return loss.detach(), logits.detach().argmax(1), report


def _norms(tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    return list(torch._foreach_norm([t.float() for t in tensors])) if tensors else []


def _combine(norms: list[torch.Tensor]) -> torch.Tensor:
    """The norm of several tensors taken together: sqrt(sum of squared norms)."""
    return torch.stack(norms).square().sum().sqrt()


# ---------------------------------------------------------------- in a run
Publish = Callable[[InspectReport], None]


class LiveInspection(Callback):
    """Decides which steps are inspected and runs them: a loop callback that wraps the run's step function.

    A step is inspected when :meth:`request` was called (the ``inspect`` command) or ``every_s``
    seconds have passed since the last inspection (0 = only on request). ``publish`` gets each report
    (the worker writes it to a file, the store, and emits the event, off the training thread).

    Off (``every_s`` 0 and nothing requested) a step pays one count and one flag test: ``armed`` is
    set by a request, kept while ``every_s`` runs the clock, and true on the very first step only to
    read where training begins.
    """

    def __init__(self, model: nn.Module, opt: torch.optim.Optimizer, *, device: torch.device, precision: str,
                 label_smoothing: float, publish: Publish, every_s: float = 0.0,
                 scaler: Callable[[], torch.amp.GradScaler | None] = lambda: None,
                 start_step: Callable[[], int] = lambda: 0, clock: Callable[[], float] = time.monotonic) -> None:
        self.model, self.opt, self.device, self.precision = model, opt, device, precision
        self.label_smoothing, self.publish, self.every_s = label_smoothing, publish, every_s
        self.scaler, self.start_step, self.clock = scaler, start_step, clock
        self.requested = False
        self.armed = True   # the first step reads the run's step; then only a request or every_s arms it
        self.calls = 0
        self.base: int | None = None
        self.last = clock()

    def request(self) -> None:
        """Inspect the next step (called from the command reader's thread: flags, no lock needed)."""
        self.requested = True
        self.armed = True

    def due(self) -> bool:
        return self.requested or (self.every_s > 0 and self.clock() - self.last >= self.every_s)

    def wrap_step(self, step_fn: StepFn) -> StepFn:
        def step(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            self.calls += 1
            if not self.armed:   # inspection off: this test and the count are all a step pays
                return step_fn(x, y)
            return self._step(step_fn, x, y)
        return step

    def _step(self, step_fn: StepFn, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.base is None:
            self.base = self.start_step()   # the run's step when training begins (0, or where it resumed)
            self.last = self.clock()        # the interval counts from training, not from the set-up
        self.armed = self.every_s > 0
        if self.requested:                  # read after the line above: a request meanwhile keeps it armed
            self.armed = True
        if not self.due():
            return step_fn(x, y)
        self.armed = self.every_s > 0
        self.requested = False              # after: a request meanwhile is served by this inspection
        loss, pred, report = inspected_step(self.model, self.opt, x, y, step=self.base + self.calls,
                                            device=self.device, precision=self.precision,
                                            label_smoothing=self.label_smoothing, scaler=self.scaler())
        self.last = self.clock()
        self.publish(report)
        return loss, pred


def write_report(report: InspectReport, run_dir: Path) -> Path:
    """Write ``report`` as ``inspect/step-<N>.json`` in the run directory (atomically); returns the path."""
    folder = run_dir / "inspect"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"step-{report.step:08d}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(report.to_dict()))
    tmp.replace(path)
    return path


def read_report(path: str | Path) -> InspectReport:
    """A report written by :func:`write_report`; ValueError naming the file when it is not one."""
    try:
        return InspectReport.from_dict(json.loads(Path(path).read_text()))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not an inspection report ({type(exc).__name__}: {exc})") from None


@dataclass(frozen=True)
class Flag:
    """A gradient out of range: the node, 'vanishing' or 'exploding', the figure, its value, the first
    step it was seen at and the latest."""

    node: str
    kind: str
    figure: str
    value: float
    first_step: int
    step: int


class InspectHistory:
    """The inspection reports of one run, in step order: a node's history of a figure (sparklines),
    the latest report (overlay, gradient-flow plot) and the flags with the step they began at."""

    def __init__(self, reports: list[InspectReport] | None = None) -> None:
        self.reports: list[InspectReport] = []
        self._first: dict[tuple[str, str], int] = {}
        for r in reports or []:
            self.add(r)

    def add(self, report: InspectReport) -> None:
        self.reports.append(report)
        self.reports.sort(key=lambda r: r.step)
        active = {(node, kind) for node, kind, _, _ in report.flags()}
        for key in active:
            self._first.setdefault(key, report.step)
        if report is self.reports[-1]:  # a flag that cleared starts again when it comes back
            for key in [k for k in self._first if k not in active]:
                del self._first[key]

    @property
    def latest(self) -> InspectReport | None:
        return self.reports[-1] if self.reports else None

    def series(self, node: str, figure: str) -> tuple[list[int], list[float]]:
        steps, values = [], []
        for r in self.reports:
            n = r.by_node().get(node)
            value = getattr(n, figure, None) if n is not None else None
            if value is not None:
                steps.append(r.step)
                values.append(value)
        return steps, values

    def flags(self) -> list[Flag]:
        """The latest report's flags, each with the step its run of flagged reports began."""
        latest = self.latest
        if latest is None:
            return []
        return [Flag(node, kind, figure, value, self._first.get((node, kind), latest.step), latest.step)
                for node, kind, figure, value in latest.flags()]


def reports_from_metrics(rows: list[tuple[int, str, float | None]]) -> list[InspectReport]:
    """A run's inspections back from its stored ``inspect/<figure>/<node>`` metric rows (other rows are
    skipped), in step order; nodes in the order they were stored (network order)."""
    by_step: dict[int, dict[str, NodeFigures]] = {}
    for step, name, value in rows:
        prefix, _, rest = name.partition("/")
        figure, _, node = rest.partition("/")
        if prefix != "inspect" or figure not in FIGURES or not node:
            continue
        nodes = by_step.setdefault(step, {})
        setattr(nodes.setdefault(node, NodeFigures(node)), figure, value)
    return [InspectReport(step, None, "", list(nodes.values())) for step, nodes in sorted(by_step.items())]


def publisher(run_dir: Path, store: Any, run_id: int, emit: Callable[[Event], None],
              submit: Callable[[Callable[[], None]], None]) -> Publish:
    """What the worker does with a report, on its recorder thread (the step never waits for a disk):
    write the file into the run directory, store the figures as metric rows, then emit ``inspect``
    (so a reader that saw the event finds the file and the rows)."""
    from .protocol import events as ev

    def publish(report: InspectReport) -> None:
        def write() -> None:
            path = write_report(report, run_dir)
            store.add_metrics(run_id, report.metric_rows())
            emit(ev.Inspect(step=report.step, path=str(path), nodes=len(report.nodes), loss=_finite(report.loss),
                            flags=[[node, kind, figure, _finite(value)] for node, kind, figure, value in report.flags()]))
        submit(write)
    return publish
