"""The inspector's editors follow each parameter's schema."""

from __future__ import annotations

import pytest

from graph_editor.model import all_layers, get_layer
from studio.docks.param_editors import (
    BoolEditor,
    ChoiceEditor,
    FloatEditor,
    IntEditor,
    TextEditor,
    make_editor,
)

pytestmark = pytest.mark.qt


def test_each_kind_gets_its_editor_with_the_schema_s_bounds_choices_and_doc(qtbot):
    conv = get_layer("Conv2d")
    out = make_editor(conv.param("out_channels"))
    qtbot.addWidget(out)
    assert isinstance(out, IntEditor) and out.field.minimum() == 1
    assert "Output channels" in out.toolTip() and "at least 1" in out.toolTip()
    assert isinstance(make_editor(conv.param("bias")), BoolEditor)
    kernel = make_editor(conv.param("kernel_size"))
    assert isinstance(kernel, TextEditor)
    kernel.set_value([5, 3])
    assert kernel.field.text() == "5, 3"
    drop = make_editor(get_layer("Dropout").param("p"))
    assert isinstance(drop, FloatEditor) and (drop.field.minimum(), drop.field.maximum()) == (0.0, 1.0)
    choice = next(p for spec in all_layers() for p in spec.params if p.kind == "choice")
    combo = make_editor(choice)
    assert isinstance(combo, ChoiceEditor)
    assert [combo.field.itemText(i) for i in range(combo.field.count())] == [str(c) for c in choice.choices]


def test_an_optional_int_shows_auto_for_none_and_a_float_keeps_small_values(qtbot):
    editor = make_editor(get_layer("Linear").param("in_features"))
    qtbot.addWidget(editor)
    editor.set_value(None)
    assert editor.field.text() == "auto" and editor.value() is None
    editor.set_value(64)
    assert editor.value() == 64
    eps = next(p for p in get_layer("BatchNorm2d").params if p.name == "eps")
    small = make_editor(eps)
    small.set_value(1e-5)
    assert small.field.text() == "1e-05" and small.value() == pytest.approx(1e-5)


def test_editors_commit_once_per_settled_value_and_not_when_set_from_the_model(qtbot):
    editor = make_editor(get_layer("Conv2d").param("out_channels"))
    qtbot.addWidget(editor)
    seen = []
    editor.committed.connect(seen.append)
    editor.set_value(32)  # the model speaking: no commit back
    assert seen == []
    editor.field.setValue(48)
    assert seen == [48]
