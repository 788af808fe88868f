"""The canvas's right-click menu: what can be done with the thing under the cursor.

:func:`context_actions` lists (label, action) pairs so the menu's content is testable
without opening a menu; :func:`show_context_menu` puts them in a ``QMenu``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QCursor, QKeyEvent, QKeySequence
from PySide6.QtWidgets import QInputDialog, QMenu

from ..model.finetune import head_node
from ..model.repeat import MAX_REPEAT
from ..model.sweep_vars import REPEAT, variables
from .groups import GroupBox, GroupFrame
from .items import NodeItem
from .wires import WireItem

if TYPE_CHECKING:
    from .canvas import GraphCanvas

Action = tuple[str, Callable[[], object]]


def ask_group_name(canvas: GraphCanvas, current: str = "block") -> str | None:
    name, ok = QInputDialog.getText(canvas, "Name the block", "Name of the block:", text=current)
    return name if ok and name.strip() else None


def ask_number(canvas: GraphCanvas, title: str, label: str, value: float, low: float, high: float,
               decimals: int) -> float | None:
    if decimals == 0:
        n, ok = QInputDialog.getInt(canvas, title, label, int(value), int(low), int(high))
        return float(n) if ok else None
    x, ok = QInputDialog.getDouble(canvas, title, label, value, low, high, decimals)
    return x if ok else None


def ask_text(canvas: GraphCanvas, title: str, label: str, current: str) -> str | None:
    text, ok = QInputDialog.getText(canvas, title, label, text=current)
    return text if ok else None


def repeat_actions(canvas: GraphCanvas, gid: str, ask: Callable[..., float | None] = ask_number,
                   ask_range: Callable[..., str | None] = ask_text) -> list[Action]:
    """Repeat a block N times, and sweep that count (Experiments > New Sweep searches it)."""
    c = canvas.controller
    group = c.graph.groups[gid]

    def repeat() -> None:
        count = ask(canvas, "Repeat block", f"Copies of {group.name} in a chain:", group.repeat, 1, MAX_REPEAT, 0)
        if count is not None:
            c.set_repeat(gid, int(count))      # a refusal shows as the canvas's hint

    def sweep() -> None:
        rng = ask_range(canvas, "Sweep the repeat count", f"Repeats of {group.name} a sweep tries (e.g. 1..4, "
                        "empty: not swept):", variables(c.graph).get(f"{gid}.{REPEAT}", "1..4"))
        if rng is not None:
            c.set_sweep(gid, REPEAT, rng)

    return [("Repeat block…", repeat), ("Sweep repeat count…", sweep)]


def training_actions(canvas: GraphCanvas, sel: list[str], node: str | None,
                     ask: Callable[..., float | None] = ask_number) -> list[Action]:
    """Freeze / Unfreeze and the learning-rate multiplier of the selection; Replace head on the head."""
    c = canvas.controller
    if not c.blocks_of(sel):
        return []
    frozen = c.is_frozen(sel)

    def scale() -> None:
        factor = ask(canvas, "Learning-rate multiplier", "Multiple of the rate (1: the rate itself):", 1.0, 0.0, 100.0, 4)
        if factor is not None:
            c.set_lr_scale(sel, factor)

    def head() -> None:
        classes = ask(canvas, "Replace head", "Classes of the new head:", c.graph.num_classes, 2, 1_000_000, 0)
        if classes is not None:
            c.replace_head(int(classes))

    out: list[Action] = [("Unfreeze" if frozen else "Freeze", lambda: c.freeze(sel, not frozen)),
                         ("Learning-rate multiplier…", scale)]
    if node is not None and node == head_node(c.graph):
        out.append(("Replace head…", head))
    return out


def context_actions(canvas: GraphCanvas, view_pos: QPointF,
                    ask_name: Callable[..., str | None] = ask_group_name,
                    ask: Callable[..., float | None] = ask_number,
                    ask_range: Callable[..., str | None] = ask_text) -> list[Action]:
    """What the menu offers at ``view_pos``: for the item there, else for the empty canvas."""
    c = canvas.controller
    item = canvas.item_at(view_pos.toPoint())
    scene_pos = canvas.mapToScene(view_pos.toPoint())
    if isinstance(item, NodeItem | GroupBox | GroupFrame):
        key = item.node_id if isinstance(item, NodeItem) else item.group_id
        if key not in c.selection:
            c.select([key])
    sel = c.selection

    def group() -> None:
        name = ask_name(canvas)
        if name:
            c.group(name, sel)

    def rename(gid: str) -> None:
        name = ask_name(canvas, c.graph.groups[gid].name)
        if name:
            c.rename_group(gid, name)

    if isinstance(item, GroupBox):
        gid = item.group_id
        more: list[Action] = [("Group into a block…", group)] if len(sel) > 1 else []
        return [("Open block", lambda: c.set_collapsed(gid, False)), ("Rename block…", lambda: rename(gid)),
                ("Ungroup", lambda: c.ungroup(gid)), ("Copy", lambda: c.copy(sel)),
                ("Duplicate", lambda: c.duplicate(sel)), *more, *training_actions(canvas, sel, None, ask),
                *repeat_actions(canvas, gid, ask, ask_range),
                ("Delete", canvas.delete_selection)]
    if isinstance(item, GroupFrame):
        gid = item.group_id
        return [("Close into a block", lambda: c.set_collapsed(gid, True)), ("Rename block…", lambda: rename(gid)),
                ("Ungroup", lambda: c.ungroup(gid)), *training_actions(canvas, sel, None, ask),
                *repeat_actions(canvas, gid, ask, ask_range)]
    if isinstance(item, NodeItem):
        actions: list[Action] = [("Copy", lambda: c.copy(sel)), ("Cut", lambda: c.cut(sel)),
                                 ("Duplicate", lambda: c.duplicate(sel))]
        if len(sel) > 1:
            actions.append(("Group into a block…", group))
            actions.append(("Auto-layout selection", lambda: c.auto_layout(sel)))
        return [*actions, *training_actions(canvas, sel, item.node_id, ask), ("Delete", canvas.delete_selection)]
    if isinstance(item, WireItem):
        edge = item.edge
        return [("Cut wire", lambda: c.disconnect(edge))]
    blocks: list[Action] = []
    if any(not g.collapsed for g in c.graph.groups.values()):
        blocks.append(("Close all blocks", lambda: c.set_all_collapsed(True)))
    if any(g.collapsed for g in c.graph.groups.values()):
        blocks.append(("Open all blocks", lambda: c.set_all_collapsed(False)))
    return [("Add layer…", lambda: canvas.open_search(view_pos)),
            ("Paste", lambda: c.paste(at=(scene_pos.x(), scene_pos.y()))),
            ("Select all", c.select_all), ("Auto-layout", c.auto_layout), *blocks, ("Fit view", canvas.fit_view)]


def show_context_menu(canvas: GraphCanvas, view_pos: QPoint) -> None:
    menu = QMenu(canvas)
    for label, action in context_actions(canvas, QPointF(view_pos)):
        menu.addAction(label).triggered.connect(lambda _=False, a=action: a())
    menu.exec(canvas.viewport().mapToGlobal(view_pos))


def edit_shortcut(canvas: GraphCanvas, event: QKeyEvent) -> bool:
    """The usual edit shortcuts, for a canvas used without the studio's actions (which,
    where present, take these keys first)."""
    c = canvas.controller
    cursor = canvas.mapToScene(canvas.viewport().mapFromGlobal(QCursor.pos()))
    keys = {QKeySequence.StandardKey.Copy: lambda: c.copy(c.selection),
            QKeySequence.StandardKey.Cut: lambda: c.cut(c.selection),
            QKeySequence.StandardKey.Paste: lambda: c.paste(at=(cursor.x(), cursor.y())),
            QKeySequence.StandardKey.SelectAll: c.select_all,
            QKeySequence.StandardKey.Undo: c.undo_stack.undo,
            QKeySequence.StandardKey.Redo: c.undo_stack.redo}
    for sequence, action in keys.items():
        if event.matches(sequence):
            action()
            return True
    if event.key() == Qt.Key.Key_D and event.modifiers() == Qt.KeyboardModifier.ControlModifier:
        c.duplicate(c.selection)
        return True
    return False
