"""The OOM doctor: will a run fit, who holds the memory at the peak, and what would make it fit.

:func:`diagnose` predicts a run's peak (:mod:`trainer.memory.prediction`), names the graph nodes holding
most at the peak and offers fixes, each with its own predicted peak and the spec changes that make
it: the largest batch that fits, bf16, channels_last, SGD instead of Adam(W), and activation
checkpointing of the graph's blocks, and on CUDA streaming a device-resident dataset from the host.
The dataset counts where the loaders keep it on the device (:func:`resident_data_bytes`, as
``trainer.checks.setup`` decides). :func:`check_run` is the worker's gate: a run predicted not to
fit its budget is refused before it starts. A fix is applied to a spec dict with :func:`apply_fix`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from graph_editor.model import Graph
from graph_editor.model.units import MiB, mib

from ..checks import channels_last as uses_channels_last
from ..checks import nhwc_pays
from ..spec import RunSpec, SpecError
from .prediction import (
    BatchTooSmall,
    Cancelled,
    DataDependentStep,
    MemoryPrediction,
    MemoryPredictionError,
    largest_batch,
    native_bf16_cpu,
    predict_memory,
    usable_bytes,
)
from .recomputation import SegmentError, resolve_segments

ADAPTIVE = ("adam", "adamw", "rmsprop")    # optimizers with per-parameter state SGD does without


@dataclass
class Fix:
    """One way to fit: the spec fields it changes (``{"train.batch_size": 74}``) and its peak."""

    name: str          # "batch", "bf16", "channels_last", "sgd", "checkpoint", "stream"
    label: str         # what a person reads: "batch 74 (the largest that fits)"
    changes: dict[str, Any]
    peak_bytes: int
    fits: bool

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "label": self.label, "changes": dict(self.changes),
                "peak_bytes": self.peak_bytes, "fits": self.fits}


@dataclass
class Diagnosis:
    prediction: MemoryPrediction
    budget: int                 # bytes the step may use
    fixes: list[Fix] = field(default_factory=list)

    @property
    def fits(self) -> bool:
        return self.prediction.most_bytes <= self.budget

    def holders(self, n: int = 3) -> list[tuple[str, int]]:
        return self.prediction.top_nodes(n)

    def message(self) -> str:
        p = self.prediction
        who = ", ".join(f"{k} {mib(v)}" for k, v in self.holders())
        more = f", and {p.unmodelled_note()}" if p.unmodelled_bytes else ""
        text = (f"predicted peak {mib(p.peak_bytes)}{more} at batch {p.batch} exceeds the "
                f"{mib(self.budget)} this device leaves for training (peak in the {p.peak_phase}"
                f"{', held most by ' + who if who else ''})")
        return text

    def problems(self) -> list[str]:
        """One line per fix, for the refusal's ``problems`` list."""
        lines = [f"train.batch_size: {self.message()}"]
        for f in self.fixes:
            verdict = "fits" if f.fits else "still too big"
            lines.append(f"fix: {f.label}: {mib(f.peak_bytes)} ({verdict}); set "
                         + ", ".join(f"{k} = {v!r}" for k, v in f.changes.items()))
        return lines

    def to_dict(self) -> dict[str, Any]:
        return {"budget_bytes": self.budget, "fits": self.fits, "prediction": self.prediction.to_dict(),
                "holders": [list(h) for h in self.holders()], "fixes": [f.to_dict() for f in self.fixes]}


def predict_for_spec(graph: Graph, spec: RunSpec, *, device: str = "cpu", channels_last: bool | None = None,
                     **changes: Any) -> MemoryPrediction:
    """The prediction for a run spec (fp16 counts as bf16: the same bytes); ``changes`` override
    batch, optimizer, precision or checkpoint."""
    precision = spec.precision.dtype if spec.precision.dtype in ("fp32", "bf16") else "bf16"
    cl = uses_channels_last(spec, graph) if channels_last is None else channels_last
    kw: dict[str, Any] = dict(batch=spec.train.batch_size, optimizer=copy.copy(spec.optim), precision=precision,
                              channels_last=cl, device=device, checkpoint=list(spec.memory.checkpoint),
                              frozen=list(spec.model.frozen))
    kw.update(changes)
    if isinstance(kw["optimizer"], str):
        opt = copy.copy(spec.optim)
        opt.name = kw["optimizer"]
        kw["optimizer"] = opt
    batch = kw.pop("batch")
    return predict_memory(graph, batch, **kw)


def diagnose(graph: Graph, spec: RunSpec, budget: int, *, device: str = "cpu",
             prediction: MemoryPrediction | None = None, channels_last: bool | None = None,
             stop: Callable[[], bool] | None = None) -> Diagnosis:
    """The prediction against ``budget`` bytes, and every fix that applies, each with its peak.
    ``stop`` is asked before each prediction (True raises memory_predict.Cancelled)."""
    pred = prediction or predict_for_spec(graph, spec, device=device, channels_last=channels_last)
    diag = Diagnosis(pred, budget)
    resident = pred.parts.get("data", 0)
    n, best = largest_batch(graph, budget, stop=stop, optimizer=pred.optimizer, precision=pred.precision,
                            channels_last=pred.channels_last, device=device, checkpoint=pred.checkpoint,
                            resident=resident, frozen=pred.frozen)
    if best is not None and n != pred.batch:
        diag.fixes.append(Fix("batch", f"batch {n} (the largest that fits)", {"train.batch_size": n},
                              best.peak_bytes, True))

    def add(name: str, label: str, changes: dict[str, Any], **override: Any) -> None:
        if stop is not None and stop():
            raise Cancelled
        override.setdefault("resident", resident)
        p = predict_for_spec(graph, spec, device=device, channels_last=override.pop("channels_last", pred.channels_last),
                             **override)
        diag.fixes.append(Fix(name, label, changes, p.peak_bytes, p.most_bytes <= budget))

    if pred.precision == "fp32":
        add("bf16", "bf16 autocast", {"precision.dtype": "bf16"}, precision="bf16")
    if not pred.channels_last and nhwc_pays(graph):
        add("channels_last", "channels_last", {"precision.channels_last": True}, channels_last=True)
    if pred.optimizer in ADAPTIVE:
        add("sgd", f"SGD with momentum instead of {pred.optimizer}", {"optim.name": "sgd"}, optimizer="sgd")
    blocks = checkpoint_blocks(graph)
    if blocks and not pred.checkpoint:
        add("checkpoint", f"activation checkpointing of {len(blocks)} block(s)", {"memory.checkpoint": blocks},
            checkpoint=blocks)
    if resident and device.startswith("cuda"):     # on the CPU the host holds the data either way
        add("stream", f"stream the dataset ({mib(resident, 0)}) from host memory", {"data.device_budget_mb": 0},
            resident=0)
    return diag


def resident_data_bytes(spec: RunSpec, raw: Any) -> int:
    """Bytes the run's loaders keep on the device: the dataset's float32 samples and int64 labels (every
    split), or 0 when it is streamed because its floats exceed ``data.device_budget_mb`` (the rule of
    ``trainer.checks.setup``). ``raw``: the dataset as read (:class:`trainer.data.RawData`)."""
    own = list(raw.own_splits().values())
    floats = 4 * (int(raw.x.size) + sum(int(x.size) for x, _ in own))
    if floats > spec.data.device_budget_mb * MiB:
        return 0
    return floats + 8 * (len(raw.y) + sum(len(y) for _, y in own))


def splits_bytes(splits: Any) -> int:
    """Bytes of prepared splits (:class:`trainer.data.Splits`) as the device loaders hold them."""
    return sum(s.x.numel() * s.x.element_size() + s.y.numel() * s.y.element_size()
               for s in (splits.train, splits.val, splits.test))


def checkpoint_blocks(graph: Graph) -> list[str]:
    """The graph's outermost groups that can be checkpointed (a ResNet's stages, a ViT's blocks)."""
    groups = graph.groups
    outer = [gid for gid, g in groups.items()
             if not any(o != gid and set(g.nodes) < set(groups[o].nodes) for o in groups)]
    order = [n.id for n in graph if n.type not in ("Input", "Output")]
    chosen: list[str] = []
    for gid in outer:
        try:
            resolve_segments(graph, order, [*chosen, gid])
        except SegmentError:
            continue
        chosen.append(gid)
    return chosen


def apply_fix(spec: dict[str, Any], fix: Fix | dict[str, Any]) -> dict[str, Any]:
    """A copy of the spec dict with the fix's changes (dotted paths) set."""
    out = copy.deepcopy(spec)
    changes = fix.changes if isinstance(fix, Fix) else fix["changes"]
    for path, value in changes.items():
        *parents, leaf = path.split(".")
        node = out
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return out




def run_budget(spec: RunSpec, device_type: str, total: int | None) -> int | None:
    """What the run may use: ``memory.budget_mb`` when set, else on CUDA the device's ``total``
    less the context and slack; None (no check) on the CPU without a budget."""
    if spec.memory.budget_mb > 0:
        return int(spec.memory.budget_mb * MiB)
    if device_type == "cuda" and total:
        return usable_bytes(total, "cuda")
    return None


def check_run(graph: Graph, spec: RunSpec, *, device_type: str, total: int | None,
              channels_last: bool, resident: int = 0) -> Diagnosis | None:
    """The worker's gate: the diagnosis (with its fixes) of a run predicted not to fit, else None;
    ``resident``: the dataset's bytes on the device. fp8 runs are not predicted (their layers are torchao's)."""
    return judge_run(graph, spec, device_type=device_type, total=total, channels_last=channels_last,
                     resident=resident)[1]


def judge_run(graph: Graph, spec: RunSpec, *, device_type: str, total: int | None, channels_last: bool,
              resident: int = 0) -> tuple[MemoryPrediction | None, Diagnosis | None]:
    """:func:`check_run` with the prediction it made (None where it predicts nothing: no budget, fp8, a
    step that reads its data's values), so the run reports the peak it was let in with."""
    budget = run_budget(spec, device_type, total)
    if budget is None or spec.precision.dtype == "fp8":
        return None, None
    dev = "cuda" if device_type == "cuda" else "cpu"
    try:
        pred = predict_for_spec(graph, spec, device=dev, channels_last=channels_last, resident=resident)
    except DataDependentStep:  # a node reads the data's values: the device computes what fake tensors cannot
        return None, None
    except MemoryPredictionError as exc:  # the step itself is refused (batch norm over one sample): say so
        field = "train.batch_size" if isinstance(exc, BatchTooSmall) else "memory"
        raise SpecError([f"{field}: {exc}"]) from None
    if pred.most_bytes <= budget:
        return pred, None
    return pred, diagnose(graph, spec, budget, device=dev, prediction=pred, channels_last=channels_last)


def gate(st: Any, given_peak: int | None = None) -> tuple[int | None, int, Diagnosis | None]:
    """:func:`judge_run` for a checked :class:`trainer.checks.Setup` (its device's total memory on
    CUDA): the worker refuses the run, as kind "oom" before ``run_started``, when the diagnosis is not
    None, and reports the predicted peak and its unmodelled bytes (oneDNN's bf16 buffers' bound,
    :attr:`MemoryPrediction.unmodelled_bytes`) in ``run_started`` when it fits.

    ``given_peak``: the studio's prediction of this very spec (the Train dialog's, made by the same
    :func:`predict_for_spec`), compared with the budget instead of predicting the run a second time;
    only a run it says does not fit is predicted again here, for the diagnosis and its fixes."""
    total = None
    if st.device.type == "cuda":
        import torch

        total = torch.cuda.mem_get_info(st.device)[1]
    if st.spec.precision.dtype == "fp8":
        return None, 0, None
    budget = run_budget(st.spec, st.device.type, total)
    native = native_bf16_cpu(st.device.type, st.spec.precision.dtype)   # the given peak leaves oneDNN's out
    if given_peak is not None and (budget is None or (given_peak <= budget and not native)):
        return given_peak, 0, None       # not native: nothing unmodelled
    resident = 0 if st.streamed else splits_bytes(st.splits)
    pred, diagnosis = judge_run(st.graph, st.spec, device_type=st.device.type, total=total,
                                channels_last=st.channels_last, resident=resident)
    return (pred.peak_bytes if pred else None), (pred.unmodelled_bytes if pred else 0), diagnosis
