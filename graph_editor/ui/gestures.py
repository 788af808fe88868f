"""The two drags that edit wires: drawing a new wire between ports, and cutting wires.

Each is a small state object the canvas creates on mouse press, feeds on mouse move and
finishes on release; both turn the gesture into one controller intent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QPainterPath, QPainterPathStroker, QPen
from PySide6.QtWidgets import QGraphicsPathItem

from ..model import Edge
from .items import PortItem
from .wires import DragWire

if TYPE_CHECKING:
    from .canvas import GraphCanvas


class WireDrag:
    """A wire drawn from ``port`` (an output, or an input when drawn backwards) to the mouse.

    Over a port of the other kind the wire snaps to it and both turn green, or red with the
    reason beside the cursor; on release the controller connects them (replacing the wire
    of an occupied single input) or says why not. A wire ``picked`` up from an input moves
    its end to the input it is dropped on, or is cut when dropped on empty canvas.
    """

    def __init__(self, canvas: GraphCanvas, port: PortItem, view_pos: QPointF, picked: Edge | None = None) -> None:
        self.canvas, self.origin, self.picked = canvas, port, picked
        self.start = view_pos
        self.moved = False
        self.target: PortItem | None = None
        self.item = DragWire(port)
        canvas.graph_scene.addItem(self.item)
        self.item.follow(canvas.mapToScene(view_pos.toPoint()))

    def problem(self, target: PortItem) -> str | None:
        src, dst = (target, self.origin) if self.origin.is_input else (self.origin, target)
        if self.picked is not None and Edge(src.node_id, dst.node_id, src.name, dst.name) == self.picked:
            return None  # back where it was
        return self.canvas.controller.connection_problem(src.node_id, src.name, dst.node_id, dst.name)

    def target_at(self, view_pos: QPointF) -> PortItem | None:
        """The port near ``view_pos``, or the first fitting port of the node under it."""
        want_input = not self.origin.is_input
        port = self.canvas.port_at(view_pos, want_input=want_input)
        if port is not None:
            return port
        item = self.canvas.itemAt(view_pos.toPoint())
        ports = getattr(item, "in_ports" if want_input else "out_ports", None)
        return next(iter(ports.values()), None) if ports else None

    def move(self, view_pos: QPointF) -> None:
        self.moved = self.moved or (view_pos - self.start).manhattanLength() > 8
        target = self.target_at(view_pos)
        if target is not self.target and self.target is not None:
            self.target.set_highlight(None)
        self.target = target
        if target is None:
            self.item.follow(self.canvas.mapToScene(view_pos.toPoint()))
            self.item.set_state(None)
            self.canvas.reason_label.hide()
            return
        self.item.follow(target.anchor())
        problem = self.problem(target)
        state = "error" if problem else "ok"
        target.set_highlight(state)
        self.item.set_state(state)
        if problem:
            self.canvas.show_reason(problem, at=view_pos)
        else:
            self.canvas.reason_label.hide()
            self.canvas.hint.emit(self.describe(target))

    def describe(self, target: PortItem) -> str:
        """What releasing here would do, for the status bar."""
        src, dst = (target, self.origin) if self.origin.is_input else (self.origin, target)
        text = f"connect {src.node_id}.{src.name} to {dst.node_id}.{dst.name}"
        graph = self.canvas.controller.graph
        old = graph.occupied(dst.node_id, dst.name) if dst.node_id in graph.nodes else None
        return f"{text}, replacing the wire from {old.src}" if old is not None else text

    def finish(self) -> str | None:
        """Connect to the port under the mouse; returns the refusal, if any."""
        self.cancel()
        target = self.target
        c = self.canvas.controller
        if self.picked is not None:
            if target is None:
                return c.disconnect(self.picked) if self.moved else None
            reason = c.rewire(self.picked, self.origin.node_id, self.origin.name, target.node_id, target.name)
            if reason:
                self.canvas.show_reason(reason)
            return reason
        if target is None and self.moved:  # dropped on empty canvas: choose a layer to place here, wired
            end = self.item.path().pointAtPercent(0 if self.origin.is_input else 1)
            self.canvas.open_search(QPointF(self.canvas.mapFromScene(end)), wire_from=self.origin)
        if target is None:
            return None
        src, dst = (target, self.origin) if self.origin.is_input else (self.origin, target)
        reason = self.canvas.controller.connect(src.node_id, src.name, dst.node_id, dst.name)
        if reason:
            self.canvas.show_reason(reason)
        return reason

    def cancel(self) -> None:
        scene = self.canvas.graph_scene
        if self.item.scene() is not None:
            scene.removeItem(self.item)
        if self.picked is not None and self.picked in scene.wires:
            scene.wires[self.picked].setVisible(scene.wire_shown(self.picked))
        if self.target is not None:
            self.target.set_highlight(None)


class CutLine:
    """A line drawn across wires (Alt-drag or Ctrl+right-drag); the wires it crosses are cut."""

    def __init__(self, canvas: GraphCanvas, view_pos: QPointF) -> None:
        self.canvas = canvas
        self.item = QGraphicsPathItem(QPainterPath(canvas.mapToScene(view_pos.toPoint())))
        self.item.setPen(QPen(canvas.graph_scene.theme.error, 1.5, Qt.PenStyle.DashLine))
        self.item.setZValue(6)
        canvas.graph_scene.addItem(self.item)

    def move(self, view_pos: QPointF) -> None:
        path = self.item.path()
        path.lineTo(self.canvas.mapToScene(view_pos.toPoint()))
        self.item.setPath(path)

    def finish(self) -> str | None:
        """Disconnect every visible wire the line crosses, in one undo step."""
        stroker = QPainterPathStroker()
        stroker.setWidth(3)
        line = stroker.createStroke(self.item.path())
        self.canvas.graph_scene.removeItem(self.item)
        scene = self.canvas.graph_scene
        edges = [w.edge for w in scene.wires.values() if w.isVisible() and w.shape().intersects(line)]
        return self.canvas.controller.disconnect_many(edges) if edges else None
