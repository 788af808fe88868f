"""What follows a node that moves, now that node items do not watch their own position (Qt called a Python
``itemChange`` for every change of every item): its wires during a drag, the scene's kept bounding
rectangle, the minimap's kept picture. Real mouse events, offscreen."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QPointF, QRectF, Qt
from PySide6.QtTest import QTest

from graph_editor.model import Edge
from graph_editor.ui.canvas import GraphCanvas


def title_of(view: GraphCanvas, node: str) -> QPoint:
    return view.mapFromScene(view.graph_scene.nodes[node].scenePos() + QPointF(60, 10))


def measured(view: GraphCanvas) -> QRectF:
    """The scene's bounding rectangle measured afresh (not the kept one)."""
    view.graph_scene.contents_changed()
    return view.graph_scene.items_rect()


def test_wires_follow_a_node_while_it_is_dragged_and_after_undo(editor, canvas):
    scene = canvas.graph_scene
    wire_in, wire_out = scene.wires[Edge("conv1", "relu1")], scene.wires[Edge("relu1", "pool1")]
    start = title_of(canvas, "relu1")
    vp = canvas.viewport()
    QTest.mousePress(vp, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, start)
    for k in range(1, 6):
        QTest.mouseMove(vp, start + QPoint(8 * k, 30 * k))
    item = scene.nodes["relu1"]
    assert item.pos().y() > 100                                   # moved, the mouse still down
    assert wire_in.ends()[1] == item.in_ports["in"].scenePos()
    assert wire_out.ends()[0] == item.out_ports["out"].scenePos()
    QTest.mouseRelease(vp, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, start + QPoint(40, 150))
    assert editor.graph.nodes["relu1"].position[1] > 100
    editor.undo_stack.undo()                                       # a model move: the scene moves it back
    assert item.pos() == QPointF(360, 0)
    assert wire_out.ends()[0] == item.out_ports["out"].scenePos()
    assert wire_in.ends()[1] == item.in_ports["in"].scenePos()


def test_the_bounding_rect_grows_when_a_node_is_dragged_out_and_shrinks_back(editor, canvas):
    scene = canvas.graph_scene
    before = scene.items_rect()
    assert before == measured(canvas)
    start = title_of(canvas, "pool1")
    vp = canvas.viewport()
    QTest.mousePress(vp, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, start)
    for k in range(1, 6):
        QTest.mouseMove(vp, start + QPoint(0, 80 * k))
    during = scene.items_rect()                                   # kept, grown in place by the drag
    assert during.bottom() > before.bottom() + 300
    assert during.contains(scene.nodes["pool1"].sceneBoundingRect())
    QTest.mouseRelease(vp, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, start + QPoint(0, 400))
    assert scene.items_rect() == measured(canvas)
    editor.undo_stack.undo()
    assert scene.items_rect() == before                           # the node that made it tall went back


def test_the_minimap_draws_a_moved_node_and_not_again_for_a_scroll(editor, canvas, qtbot):
    canvas.resetTransform()
    canvas.scale(2.0, 2.0)                                        # part of the graph out of view: it shows
    canvas.minimap.refresh()
    assert canvas.minimap.isVisible()
    minimap = canvas.minimap
    minimap.grab()
    drawn = minimap.pictures_drawn
    canvas.pan_by(-30, 0)                                         # a scroll within the graph: the picture is kept
    minimap.grab()
    assert minimap.pictures_drawn == drawn
    editor.move_nodes({"fc1": (900.0, 700.0)})                    # far below the row: the overview grows
    image = minimap.grab().toImage()
    assert minimap.pictures_drawn == drawn + 1
    spot = minimap.map_rect(canvas.graph_scene.nodes["fc1"].sceneBoundingRect()).center()
    colour = canvas.graph_scene.theme.category_color(canvas.graph_scene.nodes["fc1"].category)
    assert image.pixelColor(spot.toPoint()).name() == colour.name()
    row = minimap.map_rect(QRectF(0, 0, 10, 10)).center()
    assert abs(row.y() - spot.y()) > 10                           # drawn apart from the row it left


def test_a_node_far_out_can_be_scrolled_to(editor, canvas, qtbot):
    """The view scrolled within a fixed 200,000-wide scene rectangle: most of the 20,000-layer chain
    (3.6 million wide) could not be reached, by the minimap or any scroll."""
    editor.move_nodes({"output1": (500_000.0, 0.0)})
    qtbot.waitUntil(lambda: canvas.sceneRect().right() > 500_000, timeout=5000)
    target = canvas.graph_scene.nodes["output1"].sceneBoundingRect().center()
    canvas.centerOn(target)
    assert canvas.visible_rect().contains(target)
