"""The predicted memory of a run, for the Train dialog's memory bar and the dashboard's memory plot.

No widgets here: :func:`predict_for_dialog` (peak, parts, the largest batch that fits, the doctor's
fixes) and :func:`predicted_peak` run on a BackgroundTask's thread, where torch is imported; the
widgets (:mod:`studio.training.memory_bar`) only draw the :class:`MemoryFigures` they return.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from graph_editor.model.units import MiB, mib, nbytes

# Okabe-Ito, in the bar's order; "transient" also holds the input batch. "data": the dataset, where the
# loaders keep it on the device; "workspace": cuBLAS's workspaces on CUDA.
BANDS = (("data", "dataset", "#999999"), ("weights", "weights", "#0072B2"), ("gradients", "grads", "#56B4E9"),
         ("optimizer", "optimizer", "#009E73"), ("activations", "activations", "#E69F00"),
         ("transient", "transient", "#CC79A7"), ("workspace", "cuBLAS", "#D55E00"))
SEARCH_LIMIT = 1 << 16     # memory_predict.largest_batch's default upper bound


@dataclass
class MemoryFigures:
    """What the panel shows, computed off the GUI thread."""

    peak: int
    parts: dict[str, int]
    capacity: int | None          # bytes the device leaves for training (None: unknown)
    capacity_label: str
    batch: int
    largest_batch: int | None = None
    phase: str = ""
    node: str = ""
    fixes: list[dict[str, Any]] = field(default_factory=list)
    unmodelled: int = 0           # bytes the prediction may be under at most (oneDNN's bf16 buffers), 0: none
    unmodelled_note: str = ""     # what they are, for a person

    @property
    def fits(self) -> bool:
        return self.capacity is None or self.peak + self.unmodelled <= self.capacity

    def bands(self) -> list[tuple[str, int, str]]:
        """(label, bytes, colour) of each band, the batch folded into the transient."""
        parts = dict(self.parts)
        parts["transient"] = parts.get("transient", 0) + parts.get("batch", 0)
        return [(label, int(parts.get(kind, 0)), colour) for kind, label, colour in BANDS
                if kind != "workspace" or parts.get(kind)]     # cuBLAS's workspaces: CUDA only

    def problem(self) -> str | None:
        """The refusal line for the dialog's problem list, or None when the run fits."""
        if self.fits:
            return None
        largest = f"; the largest batch that fits is {self.largest_batch}" if self.largest_batch else \
            "; not even batch 1 fits"
        more = f" ({self.unmodelled_note})" if self.unmodelled else ""
        return (f"train.batch_size: the predicted peak {nbytes(self.peak)}{more} at batch {self.batch} does not fit "
                f"the {nbytes(self.capacity or 0)} {self.capacity_label}{largest} (see Memory for fixes)")


def predict_for_dialog(graph: Any, spec: dict[str, Any], memory_mib: int | None, device: str,
                       stop: Callable[[], bool] | None = None) -> MemoryFigures:
    """The run's predicted peak, the largest batch that fits and, when it does not fit, the doctor's
    fixes. For a BackgroundTask: torch is imported here, on its thread; ``stop`` ends it early
    (between two predictions) by raising ``trainer.memory.prediction.Cancelled``."""
    from .tasks import import_trainer

    import_trainer()
    from trainer.memory.doctor import diagnose, predict_for_spec, run_budget
    from trainer.memory.prediction import largest_batch
    from trainer.spec import spec_from_dict

    rs = spec_from_dict(spec)
    resident = resident_bytes(rs)
    kind = "cuda" if device.startswith("cuda") else "cpu"
    total = memory_mib * MiB if memory_mib else (_ram_bytes() if kind == "cpu" else None)
    budget = run_budget(rs, "cuda", total) if kind == "cuda" else (
        int(rs.memory.budget_mb * MiB) if rs.memory.budget_mb > 0 else total)
    label = ("memory.budget_mb" if rs.memory.budget_mb > 0 else
             f"{device} leaves for training" if kind == "cuda" else "of the machine's RAM")
    pred = predict_for_spec(graph, rs, device=kind, resident=resident)   # channels_last: the worker's rule
    figures = MemoryFigures(pred.peak_bytes, dict(pred.parts), budget, label, pred.batch, phase=pred.peak_phase,
                            node=pred.peak_node, unmodelled=pred.unmodelled_bytes, unmodelled_note=pred.unmodelled_note())
    if budget is None:
        return figures
    if pred.most_bytes > budget:
        diag = diagnose(graph, rs, budget, device=kind, prediction=pred, stop=stop)
        figures.fixes = [f.to_dict() for f in diag.fixes]
        batch_fix = next((f for f in diag.fixes if f.name == "batch"), None)
        figures.largest_batch = batch_fix.changes["train.batch_size"] if batch_fix else 0
    else:
        figures.largest_batch, _ = largest_batch(graph, budget, optimizer=pred.optimizer, precision=pred.precision,
                                                 channels_last=pred.channels_last, device=kind,
                                                 checkpoint=pred.checkpoint,
                                                 stop=stop, resident=resident, frozen=pred.frozen)
    return figures


def resident_bytes(rs: Any) -> int:
    """The dataset's bytes on the device for run spec ``rs`` (0 when streamed, or unreadable: the
    dialog's dataset check says why)."""
    from trainer.checks import dataset_path, load_data, load_graph
    from trainer.data.images.prepare import disk_path
    from trainer.memory.doctor import resident_data_bytes

    path, graph = dataset_path(rs), load_graph(rs, [])
    if path is not None and graph is not None and disk_path(rs.data, path, graph.input_spec.shape, []):
        return 0    # images read from disk stream from the host: reading the folder whole here would take minutes
    raw = load_data(rs, [])
    return resident_data_bytes(rs, raw) if raw is not None else 0


def predicted_peak(spec: dict[str, Any], device: str) -> tuple[int, int]:
    """The predicted peak of a training step of the run ``spec`` on ``device`` (the worker's device,
    "cpu" or "cuda:N"), for the dashboard's memory plot, and the bytes it may be under (this CPU's bf16
    kernels, not modelled; 0: none). For a BackgroundTask: torch is imported here."""
    from trainer.checks import load_graph
    from trainer.memory.doctor import predict_for_spec
    from trainer.spec import spec_from_dict

    rs = spec_from_dict(spec)
    problems: list[str] = []
    graph = load_graph(rs, problems)
    if graph is None:
        raise ValueError("; ".join(problems))
    pred = predict_for_spec(graph, rs, device="cuda" if device.startswith("cuda") else "cpu",
                            resident=resident_bytes(rs))
    return pred.peak_bytes, pred.unmodelled_bytes


def predicted_line_texts(peak: int, unmodelled: int = 0) -> tuple[str, str]:
    """The dashboard's predicted-peak line: its label, short enough for the memory plot at 1280 px, and its
    tooltip, which says the bytes the prediction may be under as the memory CLI and the Train dialog do."""
    if not unmodelled:
        return f"predicted tensors {mib(peak)}", ""
    return (f"predicted tensors {mib(peak)}\n+ up to {mib(unmodelled)}: bf16 kernels (not modelled)",
            f"up to {mib(unmodelled)} more on this CPU's bf16 kernels (not modelled)")


def _ram_bytes() -> int | None:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
