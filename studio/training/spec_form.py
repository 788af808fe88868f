"""An editor for every field of the run spec, generated from :class:`trainer.spec.RunSpec`.

The spec's dataclasses are the single description of what a run can be told; this form walks them,
so a field the trainer adds appears here without an edit. Each leaf field (``optim.lr``,
``data.augment.flip``...) gets an editor by its default's type: a check box for booleans, a spin
box for integers, a line edit for floats (learning rates want ``3e-4``) and number lists, a combo
box for the fields with a fixed set of choices. ``values()`` gives the nested dict the trainer's
``spec_from_dict`` checks; text that is not a number is reported by field path.
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass
from typing import Any

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QCheckBox, QComboBox, QLineEdit, QSpinBox, QWidget

from trainer import image_spec
from trainer import spec as ts

from ..docks.param_editors import INT_MAX, INT_MIN, StrictSpinBox

CHOICES: dict[str, tuple[str, ...]] = {
    "optim.name": ts.OPTIMIZERS, "schedule.name": ts.SCHEDULES, "precision.dtype": ts.PRECISIONS,
    "precision.compile": ts.COMPILE_MODES, "data.format": ts.FORMATS,
    "early_stopping.metric": ts.STOP_METRICS, "checkpoints.metric": ts.STOP_METRICS,
    "distributed.strategy": ts.STRATEGIES, "distributed.backend": ts.BACKENDS,
    "data.images.source": image_spec.IMAGE_SOURCES, "data.images.auto_augment": image_spec.AUTO_AUGMENTS,
    "data.images.duplicates": image_spec.DUPLICATES,
}
TEXT_LISTS = {"memory.checkpoint", "distributed.fsdp_units", "model.reinit", "model.frozen",
              "model.lr_scale", "tags"}   # lists of names (group ids, node ranges, block=factor, tags), not numbers
SKIP = {"model.graph", "base_dir"}  # the graph comes from the editor, base_dir is internal

PRESETS: dict[str, dict[str, Any]] = {
    # A first look in seconds: few epochs, no compile, no augmentation (images on disk: a mild crop, flips).
    "quick": {"train.epochs": 3, "train.batch_size": 64, "optim.name": "adamw", "optim.lr": 3e-3,
              "schedule.name": "onecycle", "precision.compile": "off", "data.augment.translate": 0,
              "optim.label_smoothing": 0.0, "early_stopping.patience": 0, "data.images.crop_scale": [0.5, 1.0],
              "data.images.auto_augment": "none", "data.images.mixup_alpha": 0.0, "data.images.cutmix_alpha": 0.0},
    # The best model this recipe gets: longer one-cycle, light augmentation, label smoothing,
    # early stopping on validation accuracy, compile where a GPU makes it pay.
    "accurate": {"train.epochs": 30, "train.batch_size": 128, "optim.name": "adamw", "optim.lr": 2e-3,
                 "optim.weight_decay": 5e-4, "schedule.name": "onecycle", "data.augment.translate": 1,
                 "optim.label_smoothing": 0.1, "early_stopping.patience": 6, "precision.compile": "off",
                 # images on disk: torchvision's classification recipe (RandomResizedCrop 0.08-1,
                 # TrivialAugmentWide, MixUp 0.2 / CutMix 1.0)
                 "data.images.crop_scale": [0.08, 1.0], "data.images.auto_augment": "trivialaugment",
                 "data.images.mixup_alpha": 0.2, "data.images.cutmix_alpha": 1.0},
}


def leaf_fields(obj: Any = None, prefix: str = "") -> list[tuple[str, Any]]:
    """(dotted path, default value) of every editable leaf field of the run spec."""
    obj = ts.RunSpec() if obj is None else obj
    out: list[tuple[str, Any]] = []
    for f in fields(obj):
        path = f"{prefix}{f.name}"
        if path in SKIP or f.metadata.get("internal"):
            continue
        value = getattr(obj, f.name)
        if is_dataclass(value):
            out += leaf_fields(value, path + ".")
        else:
            out.append((path, value))
    return out


def get_path(data: dict[str, Any], path: str) -> Any:
    for part in path.split("."):
        if not isinstance(data, dict) or part not in data:
            return None
        data = data[part]
    return data


def set_path(data: dict[str, Any], path: str, value: Any) -> None:
    *heads, last = path.split(".")
    for part in heads:
        data = data.setdefault(part, {})
    data[last] = value


class SpecForm(QObject):
    """One editor per spec field; ``changed`` on any edit. Lay the editors out as you like."""

    changed = Signal()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.defaults = dict(leaf_fields())
        self._refused: dict[str, str] = {}   # path -> why what was typed there was not taken
        self.editors: dict[str, QWidget] = {p: self._editor(p, v) for p, v in self.defaults.items()}

    def _refuse(self, path: str, reason: str | None) -> None:
        if reason:
            self._refused[path] = reason
        elif self._refused.pop(path, None) is None:
            return
        self.changed.emit()

    def _editor(self, path: str, default: Any) -> QWidget:
        if path in CHOICES:
            w = QComboBox()
            w.addItems(list(CHOICES[path]))
            w.currentIndexChanged.connect(self.changed)
        elif isinstance(default, bool):
            w = QCheckBox()
            w.toggled.connect(self.changed)
        elif isinstance(default, int):
            # any whole number goes through to the run spec's checks, which say what is wrong with it
            w = StrictSpinBox(path)
            w.setRange(INT_MIN, INT_MAX)
            w.valueChanged.connect(self.changed)
            w.refused.connect(lambda reason, p=path: self._refuse(p, reason))
            w.lineEdit().textEdited.connect(lambda _text, p=path: self._refuse(p, None))
        else:
            w = QLineEdit()
            w.textChanged.connect(self.changed)
            w.setProperty("text_list", path in TEXT_LISTS)
        w.setObjectName(path)
        w.setToolTip(path)
        self._set(w, default)
        return w

    def set_values(self, values: dict[str, Any]) -> None:
        """Set fields from a {dotted path: value} dict (a preset) without a signal per field."""
        for path, value in values.items():
            if path in self.editors:
                self.editors[path].blockSignals(True)
                self._set(self.editors[path], value)
                self.editors[path].blockSignals(False)
        self.changed.emit()

    def load(self, spec: dict[str, Any]) -> None:
        """Fill every field from a nested spec dict (missing fields keep their defaults)."""
        self.set_values({p: get_path(spec, p) if get_path(spec, p) is not None else d
                         for p, d in self.defaults.items()})

    def values(self) -> tuple[dict[str, Any], list[str]]:
        """The nested spec dict and the fields whose text is not a number (``"path: ..."``)."""
        data: dict[str, Any] = {}
        problems: list[str] = []
        for path, w in self.editors.items():
            try:
                set_path(data, path, self._get(w, self.defaults[path]))
            except ValueError:
                problems.append(f"{path}: '{w.text()}' is not a number" + (
                    " list (write them separated by commas)" if isinstance(self.defaults[path], list) else ""))
        return data, problems + list(self._refused.values())

    def value(self, path: str) -> Any:
        """The value of one field as the spec would hold it (None while its text is not a number)."""
        try:
            return self._get(self.editors[path], self.defaults[path])
        except ValueError:
            return None

    @staticmethod
    def _set(w: QWidget, value: Any) -> None:
        if isinstance(w, QComboBox):
            w.setCurrentText(str(value))
        elif isinstance(w, QCheckBox):
            w.setChecked(bool(value))
        elif isinstance(w, QSpinBox):
            w.setValue(int(value))
        elif isinstance(value, list):
            w.setText(", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value))
        elif isinstance(value, float):
            w.setText(f"{value:g}")
        else:
            w.setText(str(value))

    @staticmethod
    def _get(w: QWidget, default: Any) -> Any:
        if isinstance(w, QComboBox):
            return w.currentText()
        if isinstance(w, QCheckBox):
            return w.isChecked()
        if isinstance(w, QSpinBox):
            return w.value()
        text = w.text().strip()
        if isinstance(default, float):
            return float(text)
        if isinstance(default, list):
            parts = [p for p in text.replace(";", ",").split(",") if p.strip()]
            if w.property("text_list"):
                return [p.strip() for p in parts]
            return [int(p) if p.strip().lstrip("-").isdigit() else float(p) for p in parts]
        return text
