"""A block repeated from its right-click menu on the canvas: drawn ×N, its repeat count marked as swept,
both undoable, and the live analysis counting every copy's parameters."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPointF

from graph_editor.model.sweep_vars import space_tokens
from graph_editor.ui.menus import context_actions

from .test_groups_canvas import at, open_canvas

pytestmark = pytest.mark.qt
BLOCK = "g_layer1_1"


def test_a_block_is_repeated_and_its_count_swept_from_its_menu(qtbot, tmp_path):
    canvas, controller, live = open_canvas(qtbot, "resnet18_cifar")
    base = live.analysis.total_params
    assert controller.set_collapsed("g_layer1", False) is None      # layer1 opened: its two blocks show
    box = canvas.graph_scene.boxes[BLOCK]
    asked: list[tuple[str, float]] = []

    def ask(_canvas, title, _label, value, *_limits):
        asked.append((title, value))
        return 3

    actions = dict(context_actions(canvas, QPointF(at(canvas, box.sceneBoundingRect().center())), ask=ask,
                                   ask_range=lambda _c, _t, _l, current: "1..4"))
    actions["Repeat block…"]()
    assert asked == [("Repeat block", 1)] and controller.graph.groups[BLOCK].repeat == 3
    actions["Sweep repeat count…"]()
    assert space_tokens(controller.graph) == [f"block.{BLOCK}.repeat=1..4"]
    marks = canvas.graph_scene.marks.marked()
    assert marks[BLOCK] == ["×3", "⇄ repeat 1..4"]
    live.analyze_now()
    assert live.analysis.total_params == base + 2 * 73_984        # two more BasicBlocks of 64 channels
    canvas.grab().save(str(tmp_path / "repeat.png"))
    controller.undo_stack.undo()
    controller.undo_stack.undo()
    assert controller.graph.groups[BLOCK].repeat == 1 and BLOCK not in canvas.graph_scene.marks.marked()
