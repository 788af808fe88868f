"""The blocks and frames of a :class:`~graph_editor.ui.scene.GraphScene`: closed groups drawn as one box
with the group's ports (the wires into it end there), open ones as a frame around their members.

Mixed into the scene, whose items (``nodes``, ``wires``) and graph these methods read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from PySide6.QtCore import QRectF

from ..model import Edge, Graph, Group, Inference, fmt_shape
from ..model.hierarchy import parents, visible
from .groups import GroupBox, GroupFrame, release
from .items import NodeItem, PortItem
from .wires import WireItem, wraps

if TYPE_CHECKING:
    from PySide6.QtWidgets import QGraphicsItem

    from .marks import TrainingMarks
    from .unbuilt import Rect, Unbuilt


class BlockItems:
    """The scene's blocks (``boxes``) and frames, and the ports wires end at when a node is inside a block."""

    nodes: dict[str, NodeItem]
    wires: dict[Edge, WireItem]
    boxes: dict[str, GroupBox]
    frames: dict[str, GroupFrame]
    owner: dict[str, str]
    doubled: set[Edge]   # edges whose wire would lie on another's (the same two ports): not shown
    unbuilt: Unbuilt
    inference: Inference | None
    stats: dict[str, tuple[int, int]] | None
    marks: TrainingMarks
    _items_rect: QRectF | None
    addItem: Callable[[QGraphicsItem], None]
    removeItem: Callable[[QGraphicsItem], None]
    contents_changed: Callable[..., None]
    _make: Callable[[set[str], set[Edge]], int]
    _rect_of: Callable[[str], Rect]
    _node_rects: Callable[[], Iterator[tuple[str, QRectF]]]
    node_rect_of: Callable[[str], QRectF]

    if TYPE_CHECKING:
        @property
        def graph(self) -> Graph: ...

    def make_box(self, group: Group) -> GroupBox:
        """The block that draws collapsed ``group`` (a seam, like :meth:`make_node_item`)."""
        return GroupBox(self.graph, group)

    def _touches_box(self, edge: Edge) -> bool:
        return bool(self.boxes) and self.owner.get(edge.src) != self.owner.get(edge.dst)

    def _on_groups_changed(self) -> None:
        had_owners = bool(self.owner)
        for item in (*self.boxes.values(), *self.frames.values()):
            self.removeItem(item)
        for box in self.boxes.values():
            release(box)
        self.boxes.clear()
        self.frames.clear()
        shown = visible(self.graph.groups)
        self.owner = shown.owner
        up = parents(self.graph.groups)
        for gid in shown.boxes:
            box = self.make_box(self.graph.groups[gid])
            self.boxes[gid] = box
            self.addItem(box)
        for gid in shown.frames:
            depth, at = 0, up[gid]
            while at is not None:
                depth, at = depth + 1, up[at]
            frame = GroupFrame(self.graph.groups[gid], depth)
            self.frames[gid] = frame
            self.addItem(frame)
        if self.owner and self.unbuilt:   # a wire into a block may cross the screen from afar: made now
            owner = self.owner
            self._make(set(), {e for e in self.unbuilt.edges() if owner.get(e.src) != owner.get(e.dst)})
        if had_owners or self.owner:   # else no node was or is inside a closed block: nothing to re-wire
            self._rebind_wires()
        self._fit_frames()
        if self.inference is not None:
            self._paint_boxes(self.inference)
        self._paint_box_stats()
        self.contents_changed()

    def _rebind_wires(self) -> None:
        """Nodes inside closed blocks hidden, the others shown; each wire between the ports that stand
        for its ends now (a block's, or its node's). Where a block's one input stands for several members
        (a ResNet block's main path and its downsample both take the block's input), the edges from one
        output into it would draw as that many wires on one another, each with its label: one is shown."""
        for node_id, item in self.nodes.items():
            item.setVisible(node_id not in self.owner)
        for edge, wire in self.wires.items():
            src, dst = self.port_for(edge.src, edge.src_port, False), self.port_for(edge.dst, edge.dst_port, True)
            if src is not None and dst is not None:
                wire.rebind(src, dst)
        self.doubled = set()
        ends: set[tuple[int, int]] = set()
        for edge in self.graph.edges:
            made = self.wires.get(edge)
            if made is None or not self._touches_box(edge):
                continue
            pair = (id(made.src), id(made.dst))
            if pair in ends:
                self.doubled.add(edge)
            ends.add(pair)
        for edge, wire in self.wires.items():
            wire.setVisible(self.wire_shown(edge))

    # ---------------------------------------------------------------- lookups
    def collapsed_owner(self, node_id: str) -> str | None:
        """The block (collapsed group) ``node_id`` is hidden in, if any."""
        return self.owner.get(node_id)

    def port_for(self, node_id: str, port: str, is_input: bool) -> PortItem | None:
        """The visible port item that stands for a node's port (a group box's when collapsed)."""
        owner = self.collapsed_owner(node_id)
        if owner is not None:
            box = self.boxes[owner]
            ports = box.in_ports if is_input else box.out_ports
            found = ports.get((node_id, port))
            if found is not None:
                return found
        item = self.nodes.get(node_id)
        if item is None:
            return None
        return (item.in_ports if is_input else item.out_ports).get(port)

    def wire_shown(self, edge: Edge) -> bool:
        a, b = self.owner.get(edge.src), self.owner.get(edge.dst)
        return (a is None or a != b) and edge not in self.doubled

    def _fit_frames(self) -> None:
        """Each frame around its visible contents: nodes, blocks and (fitted first) inner frames."""
        groups = self.graph.groups
        for gid in sorted(self.frames, key=lambda g: -self.frames[g].depth):
            members = set(groups[gid].nodes)
            rects = [self.node_rect_of(n) for n in groups[gid].nodes
                     if (n in self.nodes or n in self.unbuilt) and n not in self.owner]
            rects += [b.sceneBoundingRect() for k, b in self.boxes.items() if set(groups[k].nodes) <= members]
            rects += [f.rect for k, f in self.frames.items()
                      if k != gid and set(groups[k].nodes) < members and not f.rect.isEmpty()]
            self.frames[gid].fit(rects, whole=not self._others_within(rects, members))
        if not self.frames:   # nothing more to follow (a node's marks move with it: an auto-layout of 20,000
            return            # nodes synced them 20,000 times here)
        self._items_rect = None
        self.marks.sync()     # an open block's tags sit in its header, which moved
        for wire in self.wires.values():   # a wire that wraps to the next band runs above the frames it enters
            if wire.isVisible() and wraps(wire.src.anchor(wire), wire.dst.anchor(wire)):
                wire.update_path()

    def _others_within(self, rects: list[QRectF], members: set[str]) -> bool:
        """Whether a node or block outside ``members`` lies within the rectangle around ``rects``."""
        around = QRectF()
        for r in rects:
            around = around.united(r)
        groups = self.graph.groups
        for n, rect in self._node_rects():
            if n not in members and n not in self.owner and rect.intersects(around):
                return True
        return any(not set(groups[k].nodes) <= members and b.sceneBoundingRect().intersects(around)
                   for k, b in self.boxes.items())

    def _paint_boxes(self, inference: Inference) -> None:
        by_node = inference.errors_by_node()
        for gid, box in self.boxes.items():
            members = self.graph.groups[gid].nodes
            outs = list(box.out_ports)
            shapes = list(dict.fromkeys(fmt_shape(s) for n, p in outs if (s := inference.shape_at(n, p))))
            ins = list(dict.fromkeys(fmt_shape(s) for n, p in box.sources if (s := inference.shape_at(n, p))))
            problems = [p for n in members for p in by_node.get(n, [])]
            box.set_state(", ".join(shapes), any(p.severity == "error" for p in problems),
                          [str(p) for p in problems], ", ".join(ins))

    def apply_stats(self, stats: dict[str, tuple[int, int]] | None) -> None:
        """Parameters and FLOPs per node (from the torch analysis; None when it failed): the
        blocks show their members' sums."""
        self.stats = stats
        self._paint_box_stats()

    def _paint_box_stats(self) -> None:
        for gid, box in self.boxes.items():
            if self.stats is None:
                box.set_stats(None, None)
                continue
            members = [self.stats.get(n, (0, 0)) for n in self.graph.groups[gid].nodes]
            box.set_stats(sum(p for p, _ in members), sum(f for _, f in members))
