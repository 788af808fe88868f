"""A big graph's items are made where the view looks (graph_editor/ui/unbuilt.py), and nothing a person
sees or does differs: the canvas of a lazily built 1,200-layer chain against the same chain with every
item made at once, pixel for pixel, driven by real mouse and key events offscreen."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QImage, QUndoStack
from PySide6.QtTest import QTest

from graph_editor.model import Edge, Graph, InputSpec, dumps
from graph_editor.ui.canvas import ZOOM_SETTLE_MS, GraphCanvas
from graph_editor.ui.controller import EditorController
from graph_editor.ui.items import SIMPLE_LOD
from graph_editor.ui.live import LiveAnalysis
from graph_editor.ui.scene import GraphScene
from graph_editor.ui.wires import LABEL_MIN_LOD

pytestmark = pytest.mark.slow   # 0.7-0.9 s of CPU each (two canvases of 1,204 nodes): out of make test-fast

N = 1200   # ReLUs: with the Input, Add, Linear and Output over GraphScene.LAZY_FROM


def big_chain() -> Graph:
    """Input, N ReLUs, an Add fed by the last ReLU and (over the whole row) by the first, a Linear, the Output."""
    g = Graph(InputSpec((8,)), num_classes=2)
    g.chain(("Input", "input"), *[("ReLU", f"r{i}") for i in range(N)], ("Add", "add"),
            ("Linear", "fc", {"out_features": 2}), ("Output", "output"))
    g.connect("r0", "add")   # a skip over every node: its arc crosses every view of the row
    for k, node in enumerate(g):
        node.position = (180.0 * k, 0.0)
    return g


def shown(qtbot, graph: Graph) -> GraphCanvas:
    controller = EditorController(graph, QUndoStack())
    live = LiveAnalysis(controller, analyze=False)
    view = GraphCanvas(controller, live)
    qtbot.addWidget(view)
    view.resize(1000, 600)
    view.resetTransform()
    view.centerOn(QPointF(50_000, 0))   # within the row, at 1x: a few nodes of 1,200
    view.show()
    qtbot.waitExposed(view)
    live.refresh()
    return view


@pytest.fixture
def lazy(qtbot) -> GraphCanvas:
    view = shown(qtbot, big_chain())
    assert view.graph_scene.unbuilt   # built lazily by default at this size
    return view


@pytest.fixture
def eager(qtbot, monkeypatch) -> GraphCanvas:
    with monkeypatch.context() as m:
        m.setattr(GraphScene, "LAZY_FROM", None)
        view = shown(qtbot, big_chain())
    assert not view.graph_scene.unbuilt and len(view.graph_scene.nodes) == N + 4
    return view


def pan(view: GraphCanvas, dx: int) -> None:
    """A middle-button drag of ``dx`` pixels, as a person pans."""
    vp, a = view.viewport(), QPoint(500, 300)
    QTest.mousePress(vp, Qt.MouseButton.MiddleButton, Qt.KeyboardModifier.NoModifier, a)
    for k in range(1, 4):
        QTest.mouseMove(vp, a + QPoint(dx * k // 3, 0))
    QTest.mouseRelease(vp, Qt.MouseButton.MiddleButton, Qt.KeyboardModifier.NoModifier, a + QPoint(dx, 0))


def frame(view: GraphCanvas) -> QImage:
    return view.viewport().grab().toImage()


def in_view(view: GraphCanvas) -> set[str]:
    area = view.visible_rect()
    return {n for n, node in view.controller.graph.nodes.items()
            if area.intersects(view.graph_scene.node_rect_of(n))}


def test_items_are_made_near_the_view_and_when_panned_to_and_it_looks_the_same(lazy, eager):
    scene = lazy.graph_scene
    assert frame(lazy) == frame(eager)            # the skip's arc over the row included
    assert Edge("r0", "add") in scene.wires       # made although both its ends are far off screen
    assert len(scene.nodes) < 60                  # ~6 nodes in view, half a view around
    before = set(scene.nodes)
    for _ in range(3):
        pan(lazy, -900)
        pan(eager, -900)
        assert frame(lazy) == frame(eager)
    now = in_view(lazy)
    assert now and not now & before and now <= set(scene.nodes)   # new ground, every node on it made
    assert all(Edge(f"r{i}", f"r{i + 1}") in scene.wires for i in range(N - 1)
               if f"r{i}" in now and f"r{i + 1}" in now)
    assert lazy.graph_scene.items_rect() == eager.graph_scene.items_rect()   # what fit and the minimap frame
    assert lazy.graph_scene.node_sizes() == eager.graph_scene.node_sizes()   # what the auto-layout spaces
    assert lazy.minimap.isVisible() and lazy.minimap.grab().toImage() == eager.minimap.grab().toImage()


def test_fit_shows_the_whole_graph_as_before_drawn_from_the_grid_without_items(lazy, eager):
    made = set(lazy.graph_scene.nodes)
    for view in (lazy, eager):
        QTest.keyClick(view, Qt.Key.Key_Home)
    assert lazy.zoom == eager.zoom and lazy.visible_rect() == eager.visible_rect()
    # every node drawn (as blocks), the skip's arc too; where an item's cached picture meets a sketched block
    # in one pixel, their edges blend a little otherwise (one pixel of 600,000, seen)
    assert differing(frame(lazy), frame(eager)) <= 3
    assert set(lazy.graph_scene.nodes) == made    # ... from the grid (far_sketch): no item made for it
    for x in range(0, 1000, 50):                  # the mouse over the row of blocks a pixel wide: none either
        QTest.mouseMove(lazy.viewport(), QPoint(x, lazy.mapFromScene(QPointF(0, 30)).y()))
    assert set(lazy.graph_scene.nodes) == made
    for view in (lazy, eager):                    # zoomed out by the wheel, from the fit: the same
        for _ in range(3):
            view.zoom_at(1.6, QPointF(300, 300))
        qtbot_wait_settled(view)
    assert differing(frame(lazy), frame(eager)) == 0
    assert set(lazy.graph_scene.nodes) == made


def qtbot_wait_settled(view: GraphCanvas) -> None:
    """The zoom gesture over and the tiles of its scale rendered (as between a person's frames)."""
    QTest.qWait(ZOOM_SETTLE_MS + 50)
    view.viewport().grab()
    deadline = 200
    while view.far.filling() and deadline:
        QTest.qWait(10)
        deadline -= 1


def test_far_out_a_click_and_a_band_select_nodes_that_had_no_items(lazy, qtbot):
    QTest.keyClick(lazy, Qt.Key.Key_Home)
    scene, editor = lazy.graph_scene, lazy.controller
    lazy.zoom_at(0.25 / lazy.zoom, QPointF(0, 300))   # far out (blocks, no text, no wire labels), from the fit
    lazy.centerOn(scene.node_rect_of("r125").center())
    qtbot_wait_settled(lazy)
    target = "r126"
    assert target not in scene.nodes
    QTest.mouseClick(lazy.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                     lazy.mapFromScene(scene.node_rect_of(target).center()))
    assert editor.selection == [target]           # made where the click landed, then selected
    a = lazy.mapFromScene(scene.node_rect_of("r120").topLeft()) - QPoint(3, 20)
    b = lazy.mapFromScene(scene.node_rect_of("r129").bottomRight()) + QPoint(3, 20)
    vp = lazy.viewport()
    QTest.mousePress(vp, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, a)
    for k in range(1, 6):
        QTest.mouseMove(vp, a + (b - a) * k / 5)
    QTest.mouseRelease(vp, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, b)
    assert set(editor.selection) == {f"r{i}" for i in range(120, 130)}   # a band selects what it covers
    assert len(scene.nodes) < 80                  # and no more was made


def differing(a: QImage, b: QImage) -> int:
    """Pixels that differ by more than antialiasing noise (in any channel)."""
    def pixels(image: QImage) -> np.ndarray:
        image = image.convertToFormat(QImage.Format.Format_RGB32)
        return np.frombuffer(image.constBits(), np.uint8).reshape(image.height(), image.bytesPerLine())
    return int((np.abs(pixels(a).astype(int) - pixels(b).astype(int)) > 24).sum())


def test_select_all_holds_for_nodes_without_items_and_delete_and_undo_work(lazy, qtbot):
    scene, editor = lazy.graph_scene, lazy.controller
    QTest.keyClick(lazy, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    assert len(editor.selection) == N + 4
    pan(lazy, -900)
    lazy.viewport().grab()                         # painted: the nodes come with items, selected
    assert all(scene.nodes[n].isSelected() for n in in_view(lazy))
    assert len(editor.selection) == N + 4          # made items did not shrink the selection to themselves
    one = next(n for n in in_view(lazy) if lazy.visible_rect().contains(scene.node_rect_of(n)))
    QTest.mouseClick(lazy.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.ControlModifier,
                     lazy.mapFromScene(scene.node_rect_of(one).center()))
    assert set(editor.selection) == set(editor.graph.nodes) - {one}   # Ctrl+click: that one off, the rest kept
    QTest.mouseClick(lazy.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, QPoint(500, 500))
    assert editor.selection == []                  # a plain click on empty canvas drops them all, off screen too
    QTest.keyClick(lazy, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    QTest.keyClick(lazy, Qt.Key.Key_Delete)
    assert len(editor.graph) == 0 and not scene.nodes and not scene.unbuilt
    editor.undo_stack.undo()
    assert len(editor.graph) == N + 4
    lazy.viewport().grab()
    assert in_view(lazy) <= set(scene.nodes)


def test_edits_on_a_lazily_built_graph(lazy, eager):
    editor, scene = lazy.controller, lazy.graph_scene
    saved = dumps(editor.graph)
    whole = [n for n in in_view(lazy) if lazy.visible_rect().contains(scene.node_rect_of(n))]
    a, b = sorted(whole, key=lambda n: int(n[1:]))[::len(whole) - 1]
    for view in (lazy, eager):                     # the same edits, by real events, on both
        vp = view.viewport()
        QTest.mouseClick(vp, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                         view.mapFromScene(view.graph_scene.nodes[a].sceneBoundingRect().center()))
        QTest.keyClick(view, Qt.Key.Key_Delete)
        view.controller.add_node("ReLU", (50_000.0, 300.0))
        new = view.controller.last_added
        src = view.graph_scene.nodes[b].out_ports["out"].scenePos()
        dst = view.graph_scene.nodes[new].in_ports["in"].scenePos()
        QTest.mousePress(vp, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, view.mapFromScene(src))
        for k in range(1, 6):
            QTest.mouseMove(vp, view.mapFromScene(src + (dst - src) * (k / 5)))
        QTest.mouseRelease(vp, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, view.mapFromScene(dst))
        view.live.refresh()
    assert a not in editor.graph
    assert Edge(b, new) in editor.graph.edges and Edge(b, new) in scene.wires
    assert frame(lazy) == frame(eager)
    far = f"r{N - 2}"                              # a node far off screen, without an item, moved by the model
    for view in (lazy, eager):
        view.controller.move_nodes({far: (50_200.0, 450.0)})   # into view: its wires come along
    assert far not in scene.nodes                  # not made yet: the next paint makes it, with its wires
    assert frame(lazy) == frame(eager)
    assert far in scene.nodes and Edge(far, f"r{N - 1}") in scene.wires
    while editor.undo_stack.canUndo():
        editor.undo_stack.undo()
    assert dumps(editor.graph) == saved            # what would be saved is what was opened
    lazy.viewport().grab()
    assert in_view(lazy) <= set(scene.nodes)


def test_a_marked_node_far_off_shows_its_marks_fitted_although_far_out_nothing_else_is_made(lazy):
    """Far out the nodes are drawn from the grid, without items; a node's marks (frozen, a learning-rate
    multiplier) are items on its item: a marked node gets its item however far it is."""
    editor, scene = lazy.controller, lazy.graph_scene
    assert "r900" not in scene.nodes
    editor.freeze(["r900"])
    editor.set_lr_scale(["r1100"], 0.1)
    QTest.keyClick(lazy, Qt.Key.Key_Home)
    frame(lazy)
    assert scene.marks.marked() == {"r900": ["❄ frozen"], "r1100": ["lr ×0.1"]}
    assert len(scene.nodes) < 60


def test_far_out_where_wires_still_show_their_shapes_the_labels_of_unbuilt_wires_show(qtbot, monkeypatch):
    """Between LABEL_MIN_LOD and SIMPLE_LOD nodes are blocks but a wire long enough shows its shape: the
    sketch has no labels, so items are made there (seen: labels on the rows first shown, none below)."""
    def rows() -> Graph:
        g = big_chain()
        for k, node in enumerate(g):
            node.position = (180.0 * (k % 60), 120.0 * (k // 60))   # rows of 60: each row's last feeds the next's first
        return g

    def at_far_zoom(view: GraphCanvas) -> QImage:
        view.resetTransform()
        view.scale(0.3, 0.3)
        view.centerOn(QPointF(5000, 1800))
        qtbot_wait_settled(view)
        return frame(view)

    lazy_view = shown(qtbot, rows())
    with monkeypatch.context() as m:
        m.setattr(GraphScene, "LAZY_FROM", None)
        eager_view = shown(qtbot, rows())
    assert LABEL_MIN_LOD <= 0.3 < SIMPLE_LOD
    assert differing(at_far_zoom(lazy_view), at_far_zoom(eager_view)) <= 3
