"""The Train dialog: dataset (with a preview), recipe presets, every spec field, device, problems.

Nothing starts while a problem is listed: the run spec is checked by the trainer's own
``spec_from_dict``, the graph by ``validate()``, and the dataset against the graph (class count,
sample shape) once its preview has been read on a background thread.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from graph_editor.model.finetune import plan_of
from graph_editor.model.graph import Graph
from graph_editor.model.serialize import graph_to_dict
from graph_editor.model.validate import validate
from trainer.spec import SpecError, spec_from_dict

from . import dataset_read
from .dataset_view import DatasetView
from .devices import Device
from .devices_distributed import DeviceBox
from .memory_bar import MemoryPanel
from .memory_prediction import MemoryFigures, predict_for_dialog
from .run_history import start_line
from .spec_form import PRESETS, SpecForm
from .tasks import BackgroundTask

RECIPE_FIELDS = {"name": "run name", "train.epochs": "epochs", "train.batch_size": "batch size",
                 "optim.name": "optimizer", "optim.lr": "learning rate", "schedule.name": "LR schedule",
                 "precision.dtype": "precision", "precision.compile": "torch.compile"}
DATA_FIELDS = ("data.format", "data.target", "data.image_size", "data.val_fraction", "data.test_fraction")


class TrainDialog(QDialog):
    """Collects a run spec for ``graph``; ``spec()`` is the result once accepted."""

    preview_read = Signal()   # the dataset's preview was read, or could not be (data_error says why)

    def __init__(self, graph: Graph, devices: Sequence[Device], parent: QWidget | None = None,
                 initial: dict[str, Any] | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Train")
        self.graph = graph
        self.form = SpecForm(self)
        self.devices = list(devices)
        self._summary: dict[str, Any] | None = None
        self._data_error = ""
        self._task: BackgroundTask | None = None
        self._preview_tasks: list[BackgroundTask] = []    # a superseded read still runs to its end
        self._preview_timer = QTimer(self, singleShot=True, interval=300)
        self._preview_timer.timeout.connect(self._read_preview)
        self._memory: MemoryFigures | None = None   # the predicted peak of the spec as it is now
        self._memory_spec: dict[str, Any] = {}       # the spec it was predicted for
        self._memory_task: BackgroundTask | None = None
        self._memory_stop = threading.Event()
        self._memory_tasks: list[BackgroundTask] = []     # superseded ones end at their next prediction
        self._memory_timer = QTimer(self, singleShot=True, interval=600)
        self._memory_timer.timeout.connect(self._predict_memory)
        self._build()
        if initial:
            self.form.load(initial)
            self.device_box.select_for(initial)
        else:
            self.apply_preset("quick")
        plan = plan_of(graph)
        if not plan.is_empty():     # the fine-tuning drawn on the design
            self.form.set_values(plan.spec_fields(graph))
        self.form.changed.connect(self.refresh_problems)
        self.form.changed.connect(self._sync_preset)
        self.form.changed.connect(self._show_start)
        self._show_start()
        self.form.changed.connect(self._memory_timer.start)
        self.form.changed.connect(self.dataset_view.spec_changed)
        self.device.currentIndexChanged.connect(self._memory_timer.start)
        self.device.currentIndexChanged.connect(self._show_panel)
        self.device_box.predicted.connect(self._show_panel)
        self._memory_timer.start()
        self._sync_preset()
        self._dataset_edit().textChanged.connect(self._preview_timer.start)
        fmt = self.form.editors["data.format"]
        assert isinstance(fmt, QComboBox)
        fmt.currentIndexChanged.connect(self._preview_timer.start)
        self._read_preview()
        self.resize(1100, 720)

    # ------------------------------------------------------------------ layout
    def _build(self) -> None:
        root = QVBoxLayout(self)
        cols = QHBoxLayout()
        cols.addWidget(self._dataset_box(), 1)
        right = QVBoxLayout()
        right.addWidget(self._recipe_box())
        right.addWidget(self._advanced_box(), 1)
        cols.addLayout(right, 1)
        root.addLayout(cols, 1)
        self.memory = MemoryPanel()
        self.memory.apply_fix.connect(self.form.set_values)
        root.addWidget(self.memory)
        root.addWidget(QLabel("Problems (nothing starts until this list is empty):"))
        self.problems = QListWidget()
        self.problems.setMaximumHeight(110)
        root.addWidget(self.problems)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.start_button = self.buttons.addButton("Start training", QDialogButtonBox.ButtonRole.AcceptRole)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        root.addWidget(self.buttons)

    def _dataset_box(self) -> QGroupBox:
        box = QGroupBox("Dataset")
        lay = QVBoxLayout(box)
        row = QHBoxLayout()
        path = self._dataset_edit()
        row.addWidget(path, 1)
        for text, slot in (("Digits", lambda: path.setText("digits")), ("File...", self._pick_file),
                           ("Folder...", self._pick_folder)):
            b = QPushButton(text)
            b.clicked.connect(slot)
            row.addWidget(b)
        lay.addLayout(row)
        form = QFormLayout()
        for p in DATA_FIELDS:
            form.addRow(p.split(".", 1)[1].replace("_", " "), self.form.editors[p])
        lay.addLayout(form)
        self.preview_title = QLabel("")
        self.preview_title.setWordWrap(True)
        lay.addWidget(self.preview_title)
        self.preview_title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.dataset_view = DatasetView(lambda: self.form.values()[0]["data"].get("images", {}))
        lay.addWidget(self.dataset_view, 1)
        return box

    def _recipe_box(self) -> QGroupBox:
        box = QGroupBox("Recipe and device")
        form = QFormLayout(box)
        self.preset = QComboBox()
        self.preset.addItems([*PRESETS, "custom"])
        self.preset.activated.connect(lambda _i: self.apply_preset(self.preset.currentText()))
        form.addRow("preset", self.preset)
        for p, label in RECIPE_FIELDS.items():
            form.addRow(label, self.form.editors[p])
        self.device_box = DeviceBox(self.devices, self.form, self.spec)   # with DDP/FSDP2 over several GPUs
        self.device = self.device_box.combo
        self.device.currentIndexChanged.connect(self.refresh_problems)
        self.device_box.predicted.connect(self.refresh_problems)
        form.addRow("device", self.device_box)
        self.finetune_label = QLabel("")
        self.finetune_label.setWordWrap(True)
        self.finetune_label.setToolTip("model.init_from, model.frozen, model.lr_scale and model.reinit: set on the "
                                       "canvas (Graph > Freeze, Learning-Rate Multiplier, Replace Head) or under Advanced")
        form.addRow("start", self.finetune_label)
        return box

    def _advanced_box(self) -> QGroupBox:
        box = QGroupBox("Advanced: every field of the run spec")
        box.setCheckable(True)
        box.setChecked(False)
        inner = QWidget()
        form = QFormLayout(inner)
        shown = {*RECIPE_FIELDS, *DATA_FIELDS, "data.dataset", "device"}
        hidden = [p for p in self.form.editors if p not in shown]
        for p in hidden:
            form.addRow(p, self.form.editors[p])
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(inner)
        scroll.setVisible(False)
        groups = sorted({p.split(".")[0] for p in hidden})   # what the box holds, said while it is closed
        hint = QLabel(f"Check the box to set the {len(hidden)} other fields of the run spec: {', '.join(groups)}.")
        hint.setWordWrap(True)
        box.toggled.connect(scroll.setVisible)
        box.toggled.connect(hint.setHidden)
        lay = QVBoxLayout(box)
        lay.addWidget(scroll)
        lay.addWidget(hint, 0, Qt.AlignmentFlag.AlignTop)
        self.advanced = box
        return box

    def _pick_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Dataset file", "", "Datasets (*.npz *.csv *.csv.gz)")
        if path:
            self._dataset_edit().setText(path)

    def _pick_folder(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Dataset folder")
        if path:
            self._dataset_edit().setText(path)

    def _dataset_edit(self) -> QLineEdit:
        """The dataset's line of the form (a path, or ``digits``)."""
        edit = self.form.editors["data.dataset"]
        assert isinstance(edit, QLineEdit)
        return edit

    # ------------------------------------------------------------------ state
    def apply_preset(self, name: str) -> None:
        if name in PRESETS:
            self.form.set_values(PRESETS[name])
            self.preset.setCurrentText(name)
        self.refresh_problems()

    def _show_start(self) -> None:
        """How the run starts, in one line: from scratch, or from weights with what is frozen and scaled."""
        model = self.form.values()[0].get("model", {})
        self.finetune_label.setText(start_line(model))

    def _sync_preset(self) -> None:
        """The preset box names the preset every recipe value still matches, else says "custom"."""
        self.preset.setCurrentText(matching_preset(self.form))

    def spec(self) -> dict[str, Any]:
        """The run spec as the worker reads it: the form's fields, the device, the graph itself."""
        data, _ = self.form.values()
        data["device"] = self.device.currentData() or "cpu"
        data["model"] = {**data.get("model", {}), "graph": graph_to_dict(self.graph)}   # the pretrained start kept
        return data

    def problem_list(self) -> list[str]:
        _, problems = self.form.values()
        if not problems:
            try:
                spec_from_dict(self.spec())
            except SpecError as exc:
                problems += exc.problems
        problems += [str(p) for p in validate(self.graph).problems if p.severity == "error"]
        if self._data_error:
            problems.append(f"data.dataset: {self._data_error}")
        elif self._summary is not None and not problems:
            # The trainer's own check of data against graph (imported by the preview's thread).
            from trainer.checks import check_fit

            check_fit(spec_from_dict(self.spec()), self.graph.copy(), self._summary["raw"], problems)  # as the worker feeds it
            problems += self._summary["problems"]    # an empty class folder, a single class
            if not problems and (line := self._batch_problem()):
                problems.append(line)   # before any memory verdict: a batch the data cannot fill says so
        one_process = self.device_box.choice().strategy == "none"
        if one_process and self._memory is not None and not problems and (line := self._memory.problem()):
            problems.append(line)       # predicted not to fit: refused here, as the worker would
        if not problems and (line := self.device_box.problem()):
            problems.append(line)       # one GPU's share under DDP/FSDP2 does not fit
        return problems

    def _batch_problem(self) -> str | None:
        """The worker's refusal of a batch larger than the train split, from the previewed data."""
        from trainer.checks import batch_problem, train_split_size

        spec = spec_from_dict(self.spec())
        assert self._summary is not None
        size = train_split_size(spec, self._summary["size"], self._summary.get("own_splits") or {})
        return batch_problem(spec.train.batch_size, size)

    def refresh_problems(self) -> None:
        problems = self.problem_list()
        self.problems.clear()
        self.problems.addItems(problems or ["No problems."])
        self.start_button.setEnabled(not problems and self._summary is not None)

    def accept(self) -> None:
        self.refresh_problems()
        if self.start_button.isEnabled():
            super().accept()

    # ---------------------------------------------------------------- preview
    def _read_preview(self) -> None:
        data, _ = self.form.values()
        d = data["data"]
        self._summary, self._data_error = None, ""
        self.preview_title.setText(f"Reading {d['dataset']}...")
        self.start_button.setEnabled(False)
        spec, shape = self.spec(), tuple(self.graph.input_spec.shape)
        task = BackgroundTask(lambda: dataset_read.read_summary(d["dataset"], d["format"], d["target"], d["image_size"],
                                                                spec, shape), self)
        task.done.connect(lambda s, t=task: self._show_preview(s) if t is self._task else None)
        task.error.connect(lambda m, t=task: self._show_error(m) if t is self._task else None)
        self._task = task.start()
        self._preview_tasks = [t for t in self._preview_tasks if t.is_running()] + [task]

    @property
    def dataset_summary(self) -> dict[str, Any] | None:
        """What the preview read of the dataset (size, shape, class counts, own splits); None until read."""
        return self._summary

    @property
    def data_error(self) -> str:
        """Why the dataset could not be read ("" when it could, or is being read)."""
        return self._data_error

    def _show_preview(self, summary: dict[str, Any]) -> None:
        self._summary = summary
        self.dataset_view.show_summary(summary)
        shape = " x ".join(map(str, summary["shape"]))
        title = f"{summary['size']} samples of {shape}, {len(summary['counts'])} classes"
        own = summary.get("own_splits") or {}
        if own:
            title += "; its own " + " and ".join(f"{name} split ({n})" for name, n in own.items()) + " kept"
        self.preview_title.setText(title)
        for name in ("val", "test"):      # a fraction only applies to a split the dataset does not define
            editor = self.form.editors[f"data.{name}_fraction"]
            editor.setEnabled(name not in own)
            editor.setToolTip(f"data.{name}_fraction" + (f": unused, the dataset has its own {name} split"
                                                          if name in own else ""))
        self.refresh_problems()
        self.preview_read.emit()

    def _show_error(self, message: str) -> None:
        self._data_error = message
        self.preview_title.setText(f"Cannot read this dataset: {message}")
        self.dataset_view.clear_summary()
        self.refresh_problems()
        self.preview_read.emit()

    def wait_preview(self, ms: int = 30_000) -> bool:
        return self._task.wait(ms) if self._task else True

    # ---------------------------------------------------------------- memory
    def _predict_memory(self) -> None:
        """Predict the spec's peak off the GUI thread; a newer edit makes an older result moot."""
        self._memory = None
        data, problems = self.form.values()
        if problems:
            self.memory.set_error("fix the problems below first")
            return
        spec = self.spec()
        dev = next((d for d in self.devices if d.spec == spec["device"]), None)
        self.memory.set_busy()
        self.device_box.predict(self.graph.copy(), spec)
        self._memory_stop.set()        # the previous prediction stops at its next step; nothing waits here
        stop = self._memory_stop = threading.Event()
        graph, mib = self.graph.copy(), dev.memory_mib if dev else None
        task = BackgroundTask(lambda: predict_for_dialog(graph, spec, mib, spec["device"], stop.is_set), self)
        task.done.connect(lambda f, t=task: self._show_memory(f, spec) if t is self._memory_task else None)
        task.error.connect(lambda m, t=task: self.memory.set_error(m)
                           if t is self._memory_task and not stop.is_set() else None)
        self._memory_task = task.start()
        self._memory_tasks = [t for t in self._memory_tasks if t.is_running()] + [task]

    def _stop_memory(self) -> None:
        """Ask a running prediction to end (it does between two predictions) and wait for it and for
        the dataset preview's reads: no thread may outlive the dialog (Qt aborts on a QThread
        destroyed while running)."""
        self._memory_timer.stop()
        self._memory_stop.set()
        self.device_box.stop()
        for task in self._memory_tasks + self._preview_tasks:
            task.wait()
        self.dataset_view.stop()
        self._memory_tasks, self._preview_tasks = [], []

    def done(self, result: int) -> None:
        self._stop_memory()
        super().done(result)

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt's name
        self._stop_memory()
        super().closeEvent(event)

    def predicted_peak(self) -> int | None:
        """The peak predicted for the spec as it stands (bytes), None while that prediction runs. One
        process's peak: a DDP/FSDP2 run's per-GPU figures are the device box's."""
        fresh = self._memory is not None and self._memory_spec == self.spec()   # not an edit ago
        return self._memory.peak if fresh and self._memory is not None else None

    def predicted_unmodelled(self) -> int:
        """The bytes :meth:`predicted_peak` may be under (this CPU's bf16 kernels, not modelled); 0: none."""
        return self._memory.unmodelled if self._memory is not None and self.predicted_peak() is not None else 0

    def _show_memory(self, figures: MemoryFigures, spec: dict[str, Any]) -> None:
        self._memory, self._memory_spec = figures, spec
        self._show_panel()
        self.refresh_problems()

    def _show_panel(self) -> None:
        """The memory panel shows the chosen device's figures: one process's peak, or under DDP/FSDP2
        one GPU's (each rank's batch, its share of the state)."""
        choice = self.device_box.choice()
        if choice.strategy == "none":
            self.memory.setTitle(PANEL_TITLE)
            if self._memory is not None:
                self.memory.set_figures(self._memory)
            return
        self.memory.setTitle(f"{PANEL_TITLE[:-1]} on each of {choice.nproc} GPUs, {choice.strategy.upper()})")
        per_gpu = self.device_box.per_gpu
        if per_gpu is None:
            self.memory.set_busy("Predicting one GPU's share...")
        else:
            self.memory.set_figures(rank_figures(per_gpu.ranks[choice.strategy], per_gpu.usable))

    def wait_memory(self, ms: int = 60_000) -> bool:
        """Start any pending prediction now and wait for it (tests)."""
        if self._memory_timer.isActive():
            self._memory_timer.stop()
            self._predict_memory()
        return self._memory_task.wait(ms) if self._memory_task else True


PANEL_TITLE = "Memory (predicted peak of a training step)"


def rank_figures(rank: Any, usable: int | None) -> MemoryFigures:
    """One rank's predicted peak (``trainer.memory.per_rank.RankMemory``) as the memory bar's bands:
    DDP's bucket copy of the gradients joins the gradients, FSDP2's gathered unit the weights (each
    rank's shards). No search for the largest batch or fixes: those are one process's."""
    parts = dict(rank.parts)
    parts["gradients"] = parts.get("gradients", 0) + parts.pop("ddp buckets", 0)
    parts["weights"] = parts.get("weights", 0) + parts.pop("gathered unit", 0)
    label = f"one GPU leaves for training ({rank.strategy.upper()} over {rank.world})"
    return MemoryFigures(rank.peak_bytes, parts, usable, label, rank.batch)


def matching_preset(form: SpecForm) -> str:
    """The preset whose every value the form holds, or "custom" once one differs."""
    for name, values in PRESETS.items():
        if all(_same(form.value(path), value) for path, value in values.items() if path in form.editors):
            return name
    return "custom"


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        try:
            return abs(float(a) - float(b)) <= 1e-12 * max(1.0, abs(float(b)))
        except (TypeError, ValueError):
            return False
    return a == b
