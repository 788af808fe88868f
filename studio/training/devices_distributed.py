"""The Train dialog's device choice, with data parallelism where more than one GPU is listed.

Each listed device is a choice; with N > 1 GPUs two more follow them: "all N GPUs (DDP)" and "FSDP2
over N GPUs". Choosing one writes the run spec's ``distributed`` section (strategy and processes per
machine; a single device sets strategy ``none``) and its device (``cuda``: each rank takes the GPU
of its local rank). Beside each strategy the predicted memory of one GPU
(:func:`trainer.memory.per_rank.per_rank`, off the GUI thread); "Launch on several machines..."
opens :class:`studio.training.devices_launch.LaunchDialog` for the spec as it stands.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from graph_editor.model.units import MiB, nbytes

from .devices import Device
from .spec_form import SpecForm
from .tasks import BackgroundTask


@dataclass(frozen=True)
class DeviceChoice:
    """One entry of the device box: the spec's device and its distributed strategy."""

    label: str
    device: str                    # the spec's ``device``
    strategy: str = "none"
    nproc: int = 1                 # distributed.nproc_per_node
    memory_mib: int | None = None  # one GPU's memory (the smallest listed, for a strategy)

    def fields(self) -> dict[str, Any]:
        """What choosing it sets on the spec form."""
        return {"distributed.strategy": self.strategy, "distributed.nproc_per_node": self.nproc}


def device_choices(devices: Sequence[Device]) -> list[DeviceChoice]:
    """Every device, and after the GPUs, when there are several, DDP and FSDP2 over all of them."""
    out = [DeviceChoice(d.label, d.spec, memory_mib=d.memory_mib) for d in devices]
    gpus = [d for d in devices if d.spec.startswith("cuda")]
    if len(gpus) > 1:
        n = len(gpus)
        known = [d.memory_mib for d in gpus if d.memory_mib]
        mem = min(known) if len(known) == n else None
        at = max(i for i, d in enumerate(devices) if d.spec.startswith("cuda")) + 1
        out[at:at] = [DeviceChoice(f"all {n} GPUs (DDP)", "cuda", "ddp", n, mem),
                      DeviceChoice(f"FSDP2 over {n} GPUs", "cuda", "fsdp2", n, mem)]
    return out


@dataclass
class PerGpu:
    """One GPU's predicted peak under each strategy, and what a GPU leaves for training (None: unknown)."""

    ranks: dict[str, Any]          # strategy -> trainer.memory.per_rank.RankMemory
    usable: int | None

    def fits(self, strategy: str) -> bool:
        return self.usable is None or self.ranks[strategy].peak_bytes <= self.usable

    def text(self, strategy: str) -> str:
        peak = self.ranks[strategy].peak_bytes
        if self.usable is None:
            return f"{nbytes(peak)} per GPU"
        return f"{nbytes(peak)} per GPU" + ("" if self.fits(strategy) else " (does not fit)")


def per_gpu_for_dialog(graph: Any, spec: dict[str, Any], n: int, memory_mib: int | None) -> PerGpu:
    """One GPU's predicted peak under DDP and FSDP2 over ``n`` GPUs of ``memory_mib`` each. For a
    BackgroundTask: torch is imported here, on its thread."""
    from trainer.memory.per_rank import per_rank
    from trainer.memory.prediction import usable_bytes
    from trainer.spec import spec_from_dict

    from .memory_prediction import resident_bytes

    rs = spec_from_dict(spec)
    ranks = per_rank(graph, rs, n, device="cuda", resident=resident_bytes(rs))   # every rank holds the dataset
    return PerGpu(dict(ranks), usable_bytes(memory_mib * MiB, "cuda") if memory_mib else None)


class DeviceBox(QWidget):
    """The device combo box, the per-GPU figures of the chosen strategy, and the several-machines button.

    ``combo``'s item data is the spec's device (as before); choosing an item sets the spec form's
    distributed fields. ``predict(graph, spec)`` refreshes the per-GPU figures; ``stop()`` waits for
    a running prediction (its thread must not outlive the dialog)."""

    predicted = Signal()

    def __init__(self, devices: Sequence[Device], form: SpecForm, spec: Callable[[], dict[str, Any]],
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.form, self._spec = form, spec
        self.choices = device_choices(devices)
        self.gpus = max((c.nproc for c in self.choices), default=1)
        self.combo = QComboBox()
        for c in self.choices:
            self.combo.addItem(c.label, c.device)
        self.combo.currentIndexChanged.connect(self._chosen)
        self.launch_button = QPushButton("Launch on several machines...")
        self.launch_button.setToolTip("torchrun lines for each machine and a Slurm script, from this run spec")
        self.launch_button.clicked.connect(self.open_launch)
        self.figures = QLabel("")
        self.figures.setWordWrap(True)
        self.figures.setVisible(False)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        row = QHBoxLayout()
        row.addWidget(self.combo, 1)
        row.addWidget(self.launch_button)
        lay.addLayout(row)
        lay.addWidget(self.figures)
        self.per_gpu: PerGpu | None = None
        self._task: BackgroundTask | None = None
        self._tasks: list[BackgroundTask] = []
        self.launch_dialog: QWidget | None = None

    def choice(self) -> DeviceChoice:
        return self.choices[max(self.combo.currentIndex(), 0)]

    def select_for(self, spec: dict[str, Any]) -> None:
        """Choose the entry matching a spec's device and strategy (a spec loaded into the dialog)."""
        dist = spec.get("distributed") or {}
        for i, c in enumerate(self.choices):
            if c.device == spec.get("device") and c.strategy == dist.get("strategy", "none"):
                self.combo.setCurrentIndex(i)
                return

    def _chosen(self, _index: int) -> None:
        self.form.set_values(self.choice().fields())
        self._show()

    # ---------------------------------------------------------------- per-GPU memory
    def predict(self, graph: Any, spec: dict[str, Any]) -> None:
        """Predict one GPU's memory under both strategies for ``spec`` (only with several GPUs)."""
        if self.gpus < 2:
            return
        mib = next((c.memory_mib for c in self.choices if c.strategy != "none"), None)
        task = BackgroundTask(lambda: per_gpu_for_dialog(graph, spec, self.gpus, mib), self)
        task.done.connect(lambda r, t=task: self._done(r) if t is self._task else None)
        task.error.connect(lambda m, t=task: self._failed(m) if t is self._task else None)
        self._task = task.start()
        self._tasks = [t for t in self._tasks if t.is_running()] + [task]

    def stop(self) -> None:
        for task in self._tasks:
            task.wait()
        self._tasks = []

    def wait(self, ms: int = 120_000) -> bool:
        return self._task.wait(ms) if self._task else True

    def _done(self, result: PerGpu) -> None:
        self.per_gpu = result
        for i, c in enumerate(self.choices):
            if c.strategy in result.ranks:
                self.combo.setItemText(i, f"{c.label}: {result.text(c.strategy)}")
        self._show()
        self.predicted.emit()

    def _failed(self, message: str) -> None:
        self.per_gpu = None
        for i, c in enumerate(self.choices):
            self.combo.setItemText(i, c.label)
        self.figures.setText(f"No per-GPU prediction: {message}")
        self.figures.setVisible(self.choice().strategy != "none")

    def _show(self) -> None:
        c = self.choice()
        self.figures.setVisible(c.strategy != "none")
        if c.strategy == "none":
            return
        if self.per_gpu is None:
            self.figures.setText(f"Each of {c.nproc} GPUs: predicting...")
            return
        r, room = self.per_gpu.ranks[c.strategy], self.per_gpu.usable
        parts = ", ".join(f"{k} {nbytes(v)}" for k, v in r.parts.items() if v)
        of = f" of the {nbytes(room)} a GPU leaves for training" if room else ""
        self.figures.setText(f"Each of {r.world} GPUs runs batch {r.batch}: peak {nbytes(r.peak_bytes)}{of}. "
                             f"{parts}.")

    def problem(self) -> str | None:
        """The refusal line when the chosen strategy's per-GPU peak does not fit its GPUs."""
        c, p = self.choice(), self.per_gpu
        if c.strategy == "none" or p is None or p.usable is None or p.fits(c.strategy):
            return None
        other = next((k for k in p.ranks if k != c.strategy), None)
        hint = f"; {other.upper()} needs {p.text(other)}" if other else ""
        return (f"device: {c.strategy.upper()} is predicted to need {nbytes(p.ranks[c.strategy].peak_bytes)} per "
                f"GPU, more than the {nbytes(p.usable)} a GPU leaves for training{hint}")

    # ---------------------------------------------------------------- several machines
    def open_launch(self) -> None:
        from .devices_launch import LaunchDialog

        self.launch_dialog = LaunchDialog(self._spec(), self.window())
        self.launch_dialog.show()
