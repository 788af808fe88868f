"""One editor widget per parameter kind, generated from its :class:`ParamSpec`.

Spin boxes carry the spec's bounds, combos its choices, line edits take int lists
("3, 3" or "3x3"); every editor has the doc as its tooltip. An editor emits ``committed``
with the value the user settled on (Enter, focus out, a click): the inspector decides
whether the model takes it.
"""

from __future__ import annotations

import math
import re
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtGui import QValidator
from PySide6.QtWidgets import QCheckBox, QComboBox, QDoubleSpinBox, QHBoxLayout, QLineEdit, QSpinBox, QWidget

from graph_editor.model import ParamSpec

INT_MIN, INT_MAX = -(2**31) + 1, 2**31 - 1
AUTO = "auto"


class StrictSpinBox(QSpinBox):
    """A spin box that takes whatever whole number is typed and refuses one out of its range with
    the reason (``refused``), keeping its value. A plain QSpinBox drops the keys it cannot take
    (-5 became 5, an 11th digit vanished) or quietly puts the old value back (0 classes -> 1000)."""

    refused = Signal(str)

    def __init__(self, name: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.name = name

    def validate(self, text: str, pos: int) -> tuple[QValidator.State, str, int]:
        stripped = text.strip()
        if self.specialValueText() and stripped == self.specialValueText():
            return QValidator.State.Acceptable, text, pos
        if not re.fullmatch(r"[+-]?\d*", stripped):
            return QValidator.State.Invalid, text, pos
        number = _int_or_none(stripped)
        inside = number is not None and self.minimum() <= number <= self.maximum()
        return (QValidator.State.Acceptable if inside else QValidator.State.Intermediate), text, pos

    def fixup(self, text: str) -> str:
        """Called with what was typed when it cannot be taken: say why; the old value stays."""
        reason = self.reason(text)
        if reason:
            self.refused.emit(reason)
        return text

    def reason(self, text: str) -> str | None:
        number = _int_or_none(text.strip())
        kept = f"(kept {self.textFromValue(self.value())})"
        if number is None:
            return f"{self.name} needs a whole number {kept}" if text.strip() else None
        low = self.minimum() + (1 if self.specialValueText() else 0)
        if number < low:
            return f"{number} refused: {self.name} must be at least {low} {kept}"
        if number > self.maximum():
            return f"{number} refused: {self.name} must be at most {self.maximum()} {kept}"
        return None


def _int_or_none(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


class ParamEditor(QWidget):
    """Base: holds one input widget; ``committed(value)`` when the user settles on a value,
    ``refused(reason)`` when what was typed cannot be taken (the field keeps its value).

    Subclasses provide ``_make_field()``, ``_show(value)`` and ``value()``.
    """

    committed = Signal(object)
    refused = Signal(str)

    def __init__(self, spec: ParamSpec, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.spec = spec
        self.field = self._make_field()  # type: ignore[attr-defined]
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.field)
        self.setToolTip(tooltip(spec))
        self.setFocusProxy(self.field)

    def set_value(self, value: Any) -> None:
        """Show ``value`` without emitting ``committed``."""
        self.field.blockSignals(True)
        try:
            self._show(value)  # type: ignore[attr-defined]
        finally:
            self.field.blockSignals(False)


class IntEditor(ParamEditor):
    """A spin box within the bounds; an optional int shows "auto" one step below them."""

    def _make_field(self) -> QWidget:
        box = StrictSpinBox(self.spec.name)
        box.refused.connect(self.refused)
        box.setKeyboardTracking(False)  # one commit when typing is done, not one per digit
        low = int(self.spec.minimum) if self.spec.minimum is not None else INT_MIN
        high = int(self.spec.maximum) if self.spec.maximum is not None else INT_MAX
        self._sentinel = low - 1 if self.spec.optional else None
        box.setRange(low - 1 if self.spec.optional else low, high)
        if self.spec.optional:
            box.setSpecialValueText(AUTO)
        box.valueChanged.connect(lambda _v: self.committed.emit(self.value()))
        return box

    def _show(self, value: Any) -> None:
        box: QSpinBox = self.field
        if value is None and self._sentinel is not None:
            box.setValue(self._sentinel)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            box.setValue(int(value))

    def value(self) -> int | None:
        v = self.field.value()
        return None if v == self._sentinel else v


class _FloatBox(QDoubleSpinBox):
    """Shows 1e-05 as "1e-05" rather than rounding it to the spin box's decimals."""

    def textFromValue(self, value: float) -> str:
        return f"{value:g}"

    def valueFromText(self, text: str) -> float:
        try:
            return float(text)
        except ValueError:
            return self.value()

    def validate(self, text: str, pos: int) -> tuple[QValidator.State, str, int]:
        stripped = text.strip()
        try:
            v = float(stripped)
        except ValueError:
            ok = stripped in ("", "-", "+", ".") or stripped.lower().endswith(("e", "e-", "e+"))
            return (QValidator.State.Intermediate if ok else QValidator.State.Invalid), text, pos
        inside = self.minimum() <= v <= self.maximum()
        return (QValidator.State.Acceptable if inside else QValidator.State.Intermediate), text, pos


class FloatEditor(ParamEditor):
    def _make_field(self) -> QWidget:
        box = _FloatBox()
        box.setKeyboardTracking(False)
        box.setDecimals(12)
        low = self.spec.minimum if self.spec.minimum is not None else -1e12
        high = self.spec.maximum if self.spec.maximum is not None else 1e12
        box.setRange(low, high)
        span = high - low
        box.setSingleStep(0.05 if span <= 1 else 0.1 if span <= 10 else 1.0)
        box.valueChanged.connect(lambda _v: self.committed.emit(self.value()))
        return box

    def _show(self, value: Any) -> None:
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            self.field.setValue(float(value))

    def value(self) -> float:
        return float(self.field.value())


class BoolEditor(ParamEditor):
    def _make_field(self) -> QWidget:
        box = QCheckBox()
        box.toggled.connect(lambda v: self.committed.emit(bool(v)))
        return box

    def _show(self, value: Any) -> None:
        self.field.setChecked(bool(value))

    def value(self) -> bool:
        return self.field.isChecked()


class ChoiceEditor(ParamEditor):
    def _make_field(self) -> QWidget:
        box = QComboBox()
        for choice in self.spec.choices:
            box.addItem(str(choice))
        box.activated.connect(lambda i: self.committed.emit(self.spec.choices[i]))
        return box

    def _show(self, value: Any) -> None:
        if value in self.spec.choices:
            self.field.setCurrentIndex(self.spec.choices.index(value))
        else:
            self.field.setCurrentIndex(-1)

    def value(self) -> Any:
        i = self.field.currentIndex()
        return self.spec.choices[i] if i >= 0 else None


class TextEditor(ParamEditor):
    """A line edit for int lists ("3, 3") and text; the model checks and normalises it."""

    def _make_field(self) -> QWidget:
        edit = QLineEdit()
        if self.spec.kind == "ints":
            edit.setPlaceholderText(AUTO if self.spec.optional else "e.g. " + _ints_text(self.spec.default or [3]))
        edit.editingFinished.connect(lambda: self.committed.emit(self.value()))
        return edit

    def _show(self, value: Any) -> None:
        if value is None:
            self.field.setText("")
        elif isinstance(value, list | tuple):
            self.field.setText(_ints_text(value))
        else:
            self.field.setText(str(value))

    def value(self) -> Any:
        text = self.field.text().strip()
        if self.spec.kind == "ints" and not text and self.spec.optional:
            return None
        return text


_EDITORS: dict[str, type[ParamEditor]] = {
    "int": IntEditor, "float": FloatEditor, "bool": BoolEditor, "choice": ChoiceEditor,
    "ints": TextEditor, "str": TextEditor,
}


def make_editor(spec: ParamSpec, parent: QWidget | None = None) -> ParamEditor:
    """The editor for ``spec``'s kind."""
    return _EDITORS[spec.kind](spec, parent)


def _ints_text(values: Any) -> str:
    return ", ".join(str(v) for v in values) if isinstance(values, list | tuple) else str(values)


def tooltip(spec: ParamSpec) -> str:
    """The doc plus what values are allowed."""
    allowed = []
    if spec.kind == "ints":
        allowed.append(f"{spec.length} whole numbers, e.g. 3, 3" if spec.length else "whole numbers, e.g. 2, 3")
    if spec.minimum is not None:
        allowed.append(f"at least {spec.minimum:g}")
    if spec.maximum is not None:
        allowed.append(f"at most {spec.maximum:g}")
    if spec.choices:
        allowed.append("one of " + ", ".join(str(c) for c in spec.choices))
    if spec.optional:
        allowed.append("empty or auto: taken from the input" if spec.kind == "int" else "may be empty")
    text = spec.doc or spec.name
    return f"{text}\n({'; '.join(allowed)})" if allowed else text
