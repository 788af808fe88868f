"""What the canvas draws on a node or block for training: frozen (an ice frame and a tag), a learning-rate
multiplier, a head to be re-initialised, a parameter searched by a sweep, a block's repeat count (``×3``).

:class:`TrainingMarks` follows the graph's events and keeps one :class:`MarkItem` (a child item, so it
moves with its node) on each node item, collapsed block and open block frame that has something to
show. The marks come from the graph's metadata (:mod:`graph_editor.model.finetune`,
:mod:`graph_editor.model.sweep_vars`); edits go through the controller, as every edit does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetricsF, QPainter, QPen
from PySide6.QtWidgets import QGraphicsItem, QStyleOptionGraphicsItem, QWidget
from shiboken6 import isValid

from ..model.finetune import plan_of
from ..model.sweep_vars import variables
from .groups import GroupBox, GroupFrame

if TYPE_CHECKING:
    from ..model import Graph
    from .items import NodeItem


class MarkedScene(Protocol):
    """What the marks need of the scene (:class:`~graph_editor.ui.scene.GraphScene`, which makes them)."""

    @property
    def graph(self) -> Graph: ...

    nodes: dict[str, NodeItem]
    boxes: dict[str, GroupBox]
    frames: dict[str, GroupFrame]

    def make_items(self, node_ids: list[str]) -> None: ...

    def unmade(self, node_id: str) -> bool: ...

ICE, AMBER, GREEN, VIOLET = QColor("#3d9be0"), QColor("#d98c1a"), QColor("#2f9e5b"), QColor("#8e5cd6")
SLATE = QColor("#4f6479")
TAG_H = 17.0
Tag = tuple[str, QColor]


class MarkItem(QGraphicsItem):
    """Tags in a row above ``rect`` (the parent's outline, in its coordinates) and, when frozen, an ice frame."""

    def __init__(self, parent: QGraphicsItem, rect: QRectF, tags: list[Tag], frozen: bool, inside: bool = False) -> None:
        super().__init__(parent)
        self.inside = inside    # in the right end of ``rect`` (an open block's header), not above it
        self.setAcceptedMouseButtons(Qt.MouseButton.NoButton)
        self.setZValue(3)
        self.rect, self.tags, self.frozen = rect, tags, frozen
        self.font = QFont()
        self.font.setPointSizeF(8.5)
        self.font.setBold(True)
        metrics = QFontMetricsF(self.font)
        self.widths = [metrics.horizontalAdvance(text) + 10 for text, _ in tags]
        self.setToolTip("\n".join(text for text, _ in tags))

    def _tags_at(self) -> tuple[float, float]:
        if self.inside:
            return self.rect.right() - sum(self.widths) - 4 * len(self.widths) - 6, self.rect.center().y() - TAG_H / 2
        return self.rect.left(), self.rect.top() - TAG_H - 5

    def boundingRect(self) -> QRectF:
        if self.inside:
            return self.rect.adjusted(-2, -2, 2, 2)
        width = max(self.rect.width(), sum(self.widths) + 4 * len(self.widths))
        return QRectF(self.rect.left() - 6, self.rect.top() - TAG_H - 6, width + 12, self.rect.height() + TAG_H + 12)

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget: QWidget | None = None) -> None:
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        if self.frozen:
            painter.setPen(QPen(ICE, 2.5, Qt.PenStyle.DashLine))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRoundedRect(self.rect.adjusted(-4, -4, 4, 4), 8, 8)
        painter.setFont(self.font)
        x, y = self._tags_at()
        for (text, colour), w in zip(self.tags, self.widths, strict=True):
            tag = QRectF(x, y, w, TAG_H)
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(colour)
            painter.drawRoundedRect(tag, 4, 4)
            painter.setPen(QColor("#ffffff"))
            painter.drawText(tag, Qt.AlignmentFlag.AlignCenter, text)
            x += w + 4


def node_tags(graph: Graph) -> dict[str, tuple[list[Tag], bool]]:
    """Per node id and per group id: its tags and whether it is frozen."""
    plan = plan_of(graph)
    out: dict[str, tuple[list[Tag], bool]] = {}
    marks = plan.node_marks(graph)
    swept: dict[str, list[str]] = {}
    for name, rng in variables(graph).items():
        owner, _, param = name.rpartition(".")
        swept.setdefault(owner, []).append(f"⇄ {param} {rng}")
    for node in (set(marks) | set(swept)) - set(graph.groups):
        m = marks.get(node, {})
        tags: list[Tag] = [("❄ frozen", ICE)] if m.get("frozen") else []
        if "lr_scale" in m:
            tags.append((f"lr ×{m['lr_scale']:g}", AMBER))
        if m.get("reinit"):
            tags.append(("↺ new head", GREEN))
        tags += [(text, VIOLET) for text in swept.get(node, [])]
        out[node] = (tags, bool(m.get("frozen")))
    for gid, group in graph.groups.items():
        inner = [marks.get(n, {}) for n in group.nodes]
        frozen = sum(1 for m in inner if m.get("frozen"))
        tags = []
        if frozen:
            tags.append(("❄ frozen" if frozen == len(inner) else f"❄ {frozen}/{len(inner)} frozen", ICE))
        scales = {m["lr_scale"] for m in inner if "lr_scale" in m}
        if len(scales) == 1 and all("lr_scale" in m for m in inner):
            tags.append((f"lr ×{scales.pop():g}", AMBER))
        elif scales:
            tags.append(("lr ×mixed", AMBER))
        if any(m.get("reinit") for m in inner):
            tags.append(("↺ new head", GREEN))
        n_swept = sum(len(swept.get(n, [])) for n in group.nodes)
        if n_swept:
            tags.append((f"⇄ {n_swept} swept", VIOLET))
        if group.repeat > 1:
            tags.append((f"×{group.repeat}", SLATE))      # the block stands for this many copies in a chain
        tags += [(text, VIOLET) for text in swept.get(gid, [])]     # its repeat count, searched
        if tags:
            out[gid] = (tags, bool(inner) and frozen == len(inner))
    return out


class TrainingMarks:
    """Keeps the scene's marks in step with the graph (every change re-derives them: a few dozen items)."""

    def __init__(self, scene: MarkedScene) -> None:
        self.scene = scene
        self.items: dict[str, MarkItem] = {}
        self._shown: dict[str, tuple[tuple[str, ...], bool, tuple[float, ...]]] = {}

    def sync(self) -> None:
        scene = self.scene
        wanted = node_tags(scene.graph)
        unmade = [key for key in wanted if key not in scene.graph.groups and scene.unmade(key)]
        if unmade:   # a big graph's marked node without an item yet (far out it is drawn from the grid): made
            scene.make_items(unmade)   # ... which syncs the marks again, with every item there
            return
        for key in list(self.items):
            item = self.items[key]
            owner = self._owner(key)
            if key not in wanted or owner is None or not isValid(item) or item.parentItem() is not owner:
                self._drop(key)
        for key, (tags, frozen) in wanted.items():
            owner = self._owner(key)
            if owner is None:
                continue
            rect = owner.header_rect() if isinstance(owner, GroupFrame) else owner.shape().boundingRect()
            sig = (tuple(t for t, _ in tags), frozen, (rect.x(), rect.y(), rect.width(), rect.height()))
            if self._shown.get(key) == sig:
                continue
            self._drop(key)
            frame = isinstance(owner, GroupFrame)   # tagged in its header; its members draw their own ice
            self.items[key] = MarkItem(owner, rect, tags, frozen and not frame, inside=frame)
            self._shown[key] = sig

    def _owner(self, key: str) -> QGraphicsItem | None:
        scene = self.scene
        if key in scene.graph.groups:
            box: GroupBox | GroupFrame | None = scene.boxes.get(key) or scene.frames.get(key)
            return box if box is not None and box.isVisible() else None
        item = scene.nodes.get(key)
        return item if item is not None and item.isVisible() else None

    def reset(self) -> None:
        """Forget every mark (the scene was cleared: its items are gone)."""
        self.items, self._shown = {}, {}

    def _drop(self, key: str) -> None:
        item = self.items.pop(key, None)
        self._shown.pop(key, None)
        if item is not None and isValid(item) and item.scene() is not None:   # gone with its node otherwise
            item.scene().removeItem(item)

    def marked(self) -> dict[str, list[str]]:
        """What each marked item shows (tests): key -> tag texts."""
        return {key: [t for t, _ in item.tags] for key, item in self.items.items()}
