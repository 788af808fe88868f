"""Canvas items for layer nodes and their ports.

A :class:`NodeItem` paints one node: a title bar in its category's colour, the node's
name, its key parameters and the output shape; typed ports sit on its edges (an input is
a ring, an output a filled dot, a variadic input a tall pill that takes many wires).
Items only paint and hit-test; edits go through the controller.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Protocol, cast

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QPainter, QPainterPath, QPen
from PySide6.QtWidgets import QGraphicsItem, QGraphicsScene, QStyleOptionGraphicsItem, QWidget

from ..model import Node
from ..model.catalog import output_index
from ..model.geometry import NODE_W, PORT_Y, ROW_H, SHAPE_H, TITLE_H, node_height, outputs_height, param_rows

if TYPE_CHECKING:
    from .look import SceneLook
    from .style import Theme
    from .wires import WireItem

SIMPLE_LOD = 0.38  # below this zoom, nodes are drawn as coloured blocks without text
RADIUS = 5.0
_Flag = QGraphicsItem.GraphicsItemFlag
_NODE_FLAGS = _Flag.ItemIsSelectable | _Flag.ItemIsMovable   # made once: enum arithmetic costs per node
_CACHED = QGraphicsItem.CacheMode.DeviceCoordinateCache


def lod_of(painter: QPainter) -> float:
    return QStyleOptionGraphicsItem.levelOfDetailFromTransform(painter.worldTransform())


class _NodeMoves(Protocol):
    """The scene's hook for a node item that moved (GraphScene has it: frames follow)."""

    def node_item_moved(self, item: NodeItem) -> None: ...


def scene_look(item: QGraphicsItem) -> SceneLook | None:
    """The look of the scene ``item`` is in (None outside a scene). The graph's items are only
    added to a GraphScene, which provides SceneLook; they cannot import it (it makes them)."""
    return cast("SceneLook | None", item.scene())


class PortItem:
    """An input or output port of a node (or of a collapsed group standing for a node).

    Not a ``QGraphicsItem``: its owner paints it (:meth:`draw`) and the scene finds it
    (:meth:`~graph_editor.ui.scene.GraphScene.ports_in`). Two child items per node made a 20,000-layer
    graph open with 60,000 items, and every frame walked them."""

    __slots__ = ("_owner", "_x", "_y", "_tip", "node_id", "name", "is_input", "variadic", "wires", "highlight",
                 "dangling")

    def __init__(self, parent: QGraphicsItem, node_id: str, name: str, is_input: bool,
                 variadic: bool = False) -> None:
        self._owner, self._x, self._y, self._tip = parent, 0.0, 0.0, ""
        self.node_id, self.name, self.is_input, self.variadic = node_id, name, is_input, variadic
        self.wires: list[WireItem] = []
        self.highlight: str | None = None  # "ok" or "error" while a wire is dragged over it
        self.dangling = False  # an output the node no longer has (a Split cut shorter) that wires still leave

    def parentItem(self) -> QGraphicsItem:  # noqa: N802 - the name it had as a Qt item
        """The node or block that owns (and paints) the port."""
        return self._owner

    def scene(self) -> QGraphicsScene | None:
        return self._owner.scene()

    def isVisible(self) -> bool:  # noqa: N802
        return self._owner.isVisible()

    def pos(self) -> QPointF:
        """Where the port sits in its owner's coordinates."""
        return QPointF(self._x, self._y)

    def setPos(self, x: float, y: float) -> None:  # noqa: N802
        self._x, self._y = x, y   # numbers, not a QPointF: 40,000 ports open faster

    def scenePos(self) -> QPointF:  # noqa: N802
        return self._owner.mapToScene(self._x, self._y)

    def setToolTip(self, text: str) -> None:  # noqa: N802
        self._tip = text

    def toolTip(self) -> str:  # noqa: N802
        """The owner's text if it set one (a block's port), else made from the port's name."""
        if not self._tip:
            kind = "variadic input (takes several wires)" if self.variadic else "input" if self.is_input else "output"
            self._tip = f"{self.node_id}.{self.name}: {kind}"
        return self._tip

    def boundingRect(self) -> QRectF:  # noqa: N802
        """The port's area in its own coordinates (centred on its anchor): what catches the mouse."""
        return QRectF(-9, -13, 18, 26) if self.variadic else QRectF(-9, -9, 18, 18)

    def sceneBoundingRect(self) -> QRectF:  # noqa: N802
        return self.boundingRect().translated(self.scenePos())

    def anchor(self, wire: WireItem | None = None) -> QPointF:
        """Where a wire attaches, in scene coordinates; wires on a variadic port fan out."""
        p = self.scenePos()
        if self.variadic and wire is not None and wire in self.wires and len(self.wires) > 1:
            k = self.wires.index(wire)
            p += QPointF(0, (k - (len(self.wires) - 1) / 2) * min(6.0, 16.0 / (len(self.wires) - 1)))
        return p

    def set_highlight(self, state: str | None) -> None:
        if state != self.highlight:
            self.highlight = state
            self._owner.update()

    def draw(self, painter: QPainter, theme: Theme) -> None:
        """Paint the port at its place in the owner's coordinates."""
        painter.save()
        painter.translate(self._x, self._y)
        self._draw(painter, theme)
        painter.restore()

    def _draw(self, painter: QPainter, theme: Theme) -> None:
        colour = {"ok": theme.ok, "error": theme.error}.get(self.highlight or "",
                                                          theme.error if self.dangling else theme.port_fill)
        grow = 1.5 if self.highlight else 0.0
        if self.variadic:
            painter.setPen(QPen(colour, 2))
            painter.setBrush(theme.port_ring)
            painter.drawRoundedRect(QRectF(-4 - grow, -10 - grow, 8 + 2 * grow, 20 + 2 * grow), 4, 4)
            painter.drawLine(QPointF(-1.5, -4), QPointF(1.5, -4))
            painter.drawLine(QPointF(-1.5, 4), QPointF(1.5, 4))
        elif self.is_input:
            painter.setPen(QPen(colour, 2))
            painter.setBrush(theme.port_ring)
            painter.drawEllipse(QPointF(0, 0), 4.5 + grow, 4.5 + grow)
        else:
            painter.setPen(QPen(theme.port_ring, 1.5))
            painter.setBrush(colour)
            painter.drawEllipse(QPointF(0, 0), 5 + grow, 5 + grow)


def node_text(node: Node) -> tuple[str, list[tuple[str, str]]]:
    """The title and the parameter rows a node's item shows (an imported module's own class and file)."""
    spec = node.spec
    title, rows = spec.display if spec else node.type, param_rows(node)
    if node.type == "Program":  # its source reads "blocks.0.attn (Attention)"
        path, _, cls = str(node.params.get("source", "")).partition(" (")
        return cls.rstrip(")") or "Program", [("program", path if len(path) <= 24 else "…" + path[-23:])]
    if node.type == "Module":
        module, _, cls = str(node.params.get("cls", "")).partition(":")
        short = module if len(module) <= 24 else "…" + module.rpartition(".")[2]  # the file's own name
        return cls or "Module", [("from", short or "?")] + [r for r in rows if r[0] != "cls"]
    return title, rows


def is_source(node: Node) -> bool:
    """A node with no input that is not the Input: a learned tensor (drawn with a band and a mark)."""
    spec = node.spec
    return spec is not None and not spec.inputs and node.type != "Input"


def node_bounds(height: float, source: bool, many_outputs: bool) -> tuple[float, float, float, float]:
    """(x, y, width, height) of a node item's bounds in its own coordinates: the box, its ports and marks."""
    return (-20 if source else -10, -3, NODE_W + (34 if many_outputs else 20) + (10 if source else 0), height + 6)


def node_rect(node: Node) -> tuple[float, float, float, float]:
    """(left, top, right, bottom) in the scene of the item :class:`NodeItem` makes for ``node``, known
    without making it (an item not built yet: :mod:`graph_editor.ui.unbuilt`)."""
    spec = node.spec
    outputs = len(spec.outputs_for(node.params)) if spec else 0
    height = max(node_height(len(node_text(node)[1])), outputs_height(outputs))
    left, top, width, tall = node_bounds(height, is_source(node), outputs > 1)
    x, y = node.position
    return x + left, y + top, x + left + width, y + top + tall


class NodeItem(QGraphicsItem):
    """One layer node; its state (output shape, problems) comes from the live analysis."""

    def __init__(self, node: Node) -> None:
        super().__init__()
        self.node_id = node.id
        # No ItemSendsGeometryChanges and no itemChange override: Qt called the Python override for every
        # change of every item (12 per node as a graph opens: flags, z, children, position, scene...);
        # whoever moves a node calls :meth:`follow` instead (the scene for model moves, the canvas for drags).
        self.setFlags(_NODE_FLAGS)
        self.setCacheMode(_CACHED)
        self.setZValue(1)
        self.shape_text = ""
        self.problems: list[str] = []
        self.severity: str | None = None  # "error", "warning" or None
        self.in_ports: dict[str, PortItem] = {}
        self.out_ports: dict[str, PortItem] = {}
        self.height = 0.0
        self._tip_dirty = True
        self.last_rect: QRectF | None = None   # where the scene last saw it (its bounding rectangle follows)
        self._node = node
        self._make_ports(node)
        self.refresh(node)
        self.setPos(*node.position)

    # ---------------------------------------------------------------- contents
    def _make_ports(self, node: Node) -> None:
        spec = node.spec
        for p in spec.inputs if spec else ():
            self.in_ports[p.name] = PortItem(self, node.id, p.name, True, p.variadic)
        for name in spec.outputs_for(node.params) if spec else ():
            self.out_ports[name] = PortItem(self, node.id, name, False)

    def _sync_out_ports(self, node: Node) -> None:
        """A layer with several outputs has as many ports as its parameters say: ports are added, and
        removed unless wires still leave them (those stay, drawn as errors, as validation reports)."""
        spec = self._spec
        if spec is None or not spec.multi_output:
            return
        names = spec.outputs_for(node.params)
        for name in names:
            if name not in self.out_ports:
                self.out_ports[name] = PortItem(self, node.id, name, False)
        for name, port in list(self.out_ports.items()):
            port.dangling = name not in names
            if port.dangling and not port.wires:
                del self.out_ports[name]
        order = sorted(self.out_ports, key=lambda n: output_index(n) or 0)
        self.out_ports = {n: self.out_ports[n] for n in order}

    def refresh(self, node: Node) -> None:
        """Re-read the node's title and parameters (after an edit)."""
        self._node = node
        spec = self._spec = node.spec
        self.title, self.rows = node_text(node)
        self.category = spec.category if spec else ""
        self.subtitle = node.title
        self.opaque = node.type in ("Module", "Program")  # an imported module kept whole: its class, drawn dashed
        self.source = is_source(node)  # a learned tensor
        self._sync_out_ports(node)
        self.many_outputs = len(self.out_ports) > 1
        height = max(node_height(len(self.rows)), outputs_height(len(self.out_ports)))
        if height != self.height:
            self.prepareGeometryChange()
            self.height = height
            self._bounds = QRectF(*node_bounds(height, self.source, self.many_outputs))
        for k, port in enumerate(self.in_ports.values()):
            port.setPos(0, PORT_Y + k * ROW_H)
        for k, port in enumerate(self.out_ports.values()):
            port.setPos(NODE_W, PORT_Y + k * ROW_H)
        self._update_tooltip()
        self.update()

    def set_state(self, shape_text: str, problems: list[str], severity: str | None) -> bool:
        """Show the inferred output shape and problems; returns whether anything changed."""
        if (shape_text, problems, severity) == (self.shape_text, self.problems, self.severity):
            return False
        self.shape_text, self.problems, self.severity = shape_text, problems, severity
        self._update_tooltip()
        self.update()
        return True

    def _update_tooltip(self) -> None:
        """The tooltip is made when it is read (a hover, :meth:`toolTip`), not at every change: making it
        for each of 20,000 nodes took a third of opening such a graph."""
        self._tip_dirty = True

    def toolTip(self) -> str:  # noqa: N802 - Qt's name
        if self._tip_dirty:
            self._tip_dirty = False
            self.setToolTip(self._tooltip_text())
        return super().toolTip()

    def _tooltip_text(self) -> str:
        spec = self._spec
        lines = [f"<b>{self.title}</b> &nbsp;{self.subtitle}"]
        if self.shape_text:
            lines.append(f"output {self.shape_text}")
        colour = "#e05555" if self.severity == "error" else "#c08a20"
        lines += [f"<span style='color:{colour}'>{_html(p)}</span>" for p in self.problems]
        if spec is not None:
            lines.append(f"<i>{_html(spec.doc)}</i>")
        return "<br>".join(lines)

    # ---------------------------------------------------------------- geometry
    def boundingRect(self) -> QRectF:
        return self._bounds

    def shape(self) -> QPainterPath:
        path = QPainterPath()
        path.addRoundedRect(QRectF(0, 0, NODE_W, self.height), RADIUS, RADIUS)
        return path

    def follow(self) -> None:
        """The node moved on screen: its wires follow, and the scene is told (frames, the overview)."""
        for port in (*self.in_ports.values(), *self.out_ports.values()):
            for wire in port.wires:
                wire.update_path()
        scene = self.scene()
        if scene is not None:
            cast("_NodeMoves", scene).node_item_moved(self)

    # ---------------------------------------------------------------- painting
    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget: QWidget | None = None) -> None:
        scene = scene_look(self)
        if scene is None:  # Qt paints an item only while it is in a scene
            return
        theme = scene.theme
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        rect = QRectF(0, 0, NODE_W, self.height)
        error = self.severity == "error"
        border = theme.selected if self.isSelected() else theme.error if error else (
            theme.warning if self.severity else theme.node_border)
        width = 2.0 if (self.isSelected() or self.severity) else 1.0
        lod = lod_of(painter)
        if lod < SIMPLE_LOD:
            fill = theme.error if error else theme.category_color(self.category)
            if lod * NODE_W < 3:   # a few pixels wide: a block of its colour, never thinner than a pixel
                painter.setPen(QPen(fill, 0))   # cosmetic: one screen pixel at any zoom
                painter.setBrush(fill)
                painter.drawRect(rect)
                return
            painter.setPen(QPen(border, width * 2))
            painter.setBrush(fill)
            painter.drawRoundedRect(rect, RADIUS, RADIUS)
            return
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(theme.error_body if error else theme.node_body)
        painter.drawRoundedRect(rect, RADIUS, RADIUS)
        painter.fillPath(_title_bar(), QBrush(theme.error if error else theme.category_color(self.category)))
        self._paint_text(painter, scene)
        pen = QPen(border, width)
        if self.opaque:
            pen = QPen(theme.selected if self.isSelected() else theme.text_dim if not self.severity else border,
                       max(width, 1.5), Qt.PenStyle.DashLine)
        painter.setPen(pen)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawRoundedRect(rect, RADIUS, RADIUS)
        for port in (*self.in_ports.values(), *self.out_ports.values()):
            port.draw(painter, theme)
        if self.source:
            self._paint_source_mark(painter, theme)
        if self.many_outputs:
            self._paint_port_numbers(painter, scene)

    def _paint_source_mark(self, painter: QPainter, theme: Theme) -> None:
        """A node with no input (a learned tensor) gets a band down its left edge and a tensor mark where
        inputs would be, so it does not read as a layer with an unwired input."""
        colour = theme.category_color(self.category)
        band = QPainterPath()
        band.addRoundedRect(QRectF(0, 0, 8, self.height), RADIUS, RADIUS)
        band.addRect(QRectF(4, 0, 4, self.height))
        painter.fillPath(band.simplified(), QBrush(colour))
        painter.setPen(QPen(theme.title_text, 1.0))
        painter.setBrush(colour)
        for k in range(3):  # three stacked squares: a tensor of values
            painter.drawRect(QRectF(-17 + 3.5 * k, PORT_Y - 2 - 3.5 * k, 9, 9))

    def _paint_port_numbers(self, painter: QPainter, scene: SceneLook) -> None:
        """Output numbers beside the ports of a layer with several outputs (0 is ``out``, 1 ``out1``...)."""
        painter.setFont(scene.fonts.small)
        for name, port in self.out_ports.items():
            painter.setPen(scene.theme.error if port.dangling else scene.theme.text_dim)
            y = port.pos().y()
            painter.drawText(QRectF(NODE_W + 7, y - 12, 20, 11),
                             Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, str(output_index(name)))

    def _paint_text(self, painter: QPainter, scene: SceneLook) -> None:
        theme, fonts, metrics = scene.theme, scene.fonts, scene.metrics
        pad = 10.0
        inner = NODE_W - 2 * pad
        title_font, title = metrics.fitted("title", self.title, inner, TITLE_H)
        painter.setFont(title_font)
        painter.setPen(theme.title_text)
        painter.drawText(QRectF(pad, 0, inner, TITLE_H), Qt.AlignmentFlag.AlignVCenter, title)
        y = TITLE_H
        painter.setFont(fonts.small)
        painter.setPen(theme.text_dim)
        painter.drawText(QRectF(pad, y, inner, ROW_H), Qt.AlignmentFlag.AlignVCenter,
                         metrics.elide("small", self.subtitle, Qt.TextElideMode.ElideMiddle, inner))
        y += ROW_H
        painter.setFont(fonts.body)
        for name, value in self.rows:
            row = QRectF(pad, y, inner, ROW_H)
            painter.setPen(theme.text_dim)
            painter.drawText(row, Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft, name)
            painter.setPen(theme.text)
            value_w = inner - metrics.advance("body", name) - 8
            painter.drawText(row, Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight,
                             metrics.elide("body", value, Qt.TextElideMode.ElideRight, value_w))
            y += ROW_H
        painter.setPen(QPen(theme.grid_major, 1))
        painter.drawLine(QPointF(6, y + 2), QPointF(NODE_W - 6, y + 2))
        painter.setFont(fonts.mono)
        if self.severity == "error":
            painter.setPen(theme.error)
            text = "⚠ " + (self.problems[0] if self.problems else "problem")
        else:
            painter.setPen(theme.shape_text)
            text = f"→ {self.shape_text}" if self.shape_text else "→ ?"
        painter.drawText(QRectF(pad, y + 3, inner, SHAPE_H), Qt.AlignmentFlag.AlignVCenter,
                         metrics.elide("mono", text, Qt.TextElideMode.ElideRight, inner))


@lru_cache(maxsize=1)
def _title_bar() -> QPainterPath:
    """The title bar's outline: rounded at the top only (the same for every node)."""
    title = QPainterPath()
    title.setFillRule(Qt.FillRule.WindingFill)
    title.addRoundedRect(QRectF(0, 0, NODE_W, TITLE_H), RADIUS, RADIUS)
    title.addRect(QRectF(0, TITLE_H / 2, NODE_W, TITLE_H / 2))
    return title.simplified()


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
