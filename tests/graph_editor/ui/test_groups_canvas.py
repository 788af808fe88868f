"""Big graphs on the canvas: nested blocks with their sums, opened in place by a real double-click,
wire shapes readable at Fit View."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QEvent, QPoint, QPointF, QRectF, Qt
from PySide6.QtGui import QMouseEvent, QUndoStack
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from graph_editor.model import fmt_shape, load_graph
from graph_editor.ui.canvas import GraphCanvas
from graph_editor.ui.controller import EditorController
from graph_editor.ui.live import LiveAnalysis

TEMPLATES = Path(__file__).resolve().parents[3] / "assets" / "templates"


def open_canvas(qtbot, name: str) -> tuple[GraphCanvas, EditorController, LiveAnalysis]:
    controller = EditorController(load_graph(TEMPLATES / f"{name}.graph.json"), QUndoStack())
    live = LiveAnalysis(controller)
    canvas = GraphCanvas(controller, live)
    qtbot.addWidget(canvas)
    canvas.resize(1440, 900)
    canvas.show()
    qtbot.waitExposed(canvas)
    live.refresh()
    live.analyze_now()
    canvas.fit_view()
    return canvas, controller, live


def gid(controller: EditorController, name: str) -> str:
    return next(k for k, g in controller.graph.groups.items() if g.name == name)


def at(canvas: GraphCanvas, p: QPointF) -> QPoint:
    return canvas.mapFromScene(p)


def shown_rects(canvas: GraphCanvas) -> list[tuple[str, QRectF]]:
    scene = canvas.graph_scene
    items = [(k, i) for k, i in scene.nodes.items() if i.isVisible()] + list(scene.boxes.items())
    return [(k, i.mapRectToScene(i.shape().boundingRect())) for k, i in items]


def overlapping(canvas: GraphCanvas) -> list[tuple[str, str]]:
    rects = shown_rects(canvas)
    return [(a, b) for i, (a, ra) in enumerate(rects) for b, rb in rects[i + 1:] if ra.intersects(rb)]


def test_a_block_shows_ports_shapes_params_and_flops_summed_over_its_members(qtbot):
    canvas, controller, live = open_canvas(qtbot, "resnet50")
    scene, graph = canvas.graph_scene, controller.graph
    stats = live.analysis.by_id()
    assert {graph.groups[k].name for k in scene.boxes} == {"stem", "layer1", "layer2", "layer3", "layer4", "head"}
    for k, box in scene.boxes.items():
        members = graph.groups[k].nodes
        assert box.params == sum(stats[n].params for n in members) > 0
        assert box.flops == sum(stats[n].flops for n in members) > 0
        assert len(box.sources) == 1 and len(box.out_ports) == 1  # one tensor in, one out
        (last, _), = box.out_ports
        assert box.shape_text == fmt_shape(live.inference.shapes[last])
    layer1 = scene.boxes[gid(controller, "layer1")]
    assert (layer1.in_text, layer1.shape_text, layer1.kind) == ("64x56x56", "256x56x56", "Sequential")
    # the stage's one input port stands for both ports the first block reads (main path and shortcut)
    assert {("layer1_0_conv1", "in"), ("layer1_0_downsample_0", "in")} <= set(layer1.in_ports)
    assert len(set(layer1.in_ports.values())) == 1
    loose = sum(stats[n].params for n in graph.nodes if n not in scene.owner and n in stats)
    assert sum(b.params for b in scene.boxes.values()) + loose == live.analysis.total_params == 25_557_032


def test_a_real_double_click_opens_a_block_in_place_and_undo_closes_it(qtbot):
    canvas, controller, _ = open_canvas(qtbot, "resnet18")
    scene, graph = canvas.graph_scene, controller.graph
    before = {n: node.position for n, node in graph.nodes.items()}
    layer2 = gid(controller, "layer2")
    box = scene.boxes[layer2]
    QTest.mouseDClick(canvas.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                      at(canvas, box.sceneBoundingRect().center()))
    assert graph.groups[layer2].collapsed is False and layer2 in scene.frames and layer2 not in scene.boxes
    inner = {graph.groups[k].name for k in scene.boxes}
    assert {"layer2.0", "layer2.1", "layer1", "layer3"} <= inner  # its blocks show, the others stay closed
    assert not overlapping(canvas)
    frame = scene.frames[layer2]
    for k in ("layer2.0", "layer2.1"):
        assert frame.rect.contains(scene.boxes[gid(controller, k)].sceneBoundingRect())
    assert controller.undo_stack.undoText() == "Open layer2"
    controller.undo_stack.undo()
    assert graph.groups[layer2].collapsed and {n: node.position for n, node in graph.nodes.items()} == before
    controller.undo_stack.redo()
    # open the block inside it too, then close the stage by a double-click on its frame's title
    QTest.mouseDClick(canvas.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                      at(canvas, scene.boxes[gid(controller, "layer2.0")].sceneBoundingRect().center()))
    assert not graph.groups[gid(controller, "layer2.0")].collapsed and scene.nodes["layer2_0_conv1"].isVisible()
    assert not overlapping(canvas)
    canvas.fit_view()
    title = scene.frames[layer2].header_rect()
    QTest.mouseDClick(canvas.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                      at(canvas, QPointF(title.left() + 30, title.center().y())))
    assert graph.groups[layer2].collapsed and layer2 in scene.boxes
    assert not scene.nodes["layer2_0_conv1"].isVisible()
    assert not overlapping(canvas)


def test_every_wire_between_blocks_shows_its_shape_at_fit_view(qtbot):
    canvas, controller, _ = open_canvas(qtbot, "resnet50")
    shown = [w for w in canvas.graph_scene.wires.values() if w.isVisible()]
    assert len(shown) == 7   # input, stem, layer1-4, head, output in a row (layer1's input feeds two members: one wire)
    for wire in shown:
        assert wire.label and not wire.label_rect(canvas.zoom).isEmpty(), str(wire.edge)
    assert canvas.zoom > 0.8  # a screen of readable blocks, not a thin line


def test_a_short_wire_shows_its_shape_on_hover(qtbot):
    canvas, controller, _ = open_canvas(qtbot, "lenet5")
    scene = canvas.graph_scene
    canvas.zoom_at(0.35 / canvas.zoom, QPointF(canvas.viewport().rect().center()))
    canvas.centerOn(scene.nodes["conv1"].sceneBoundingRect().center())
    wire = next(w for e, w in scene.wires.items() if e.src == "conv1")
    assert wire.label == "6x28x28" and wire.label_rect(canvas.zoom).isEmpty()  # 120 px of wire, 42 on screen
    a, b = wire.src.scenePos(), wire.dst.scenePos()
    target = at(canvas, (a + b) / 2)
    # The pointer comes down onto the wire. (A move event straight to the viewport: QTest's
    # window-level moves lose track of which window is under the pointer once an earlier
    # test's window is gone, offscreen.)
    for step in (QPoint(0, 40), QPoint(0, 20), QPoint(0, 0)):
        point = QPointF(target + step)
        QApplication.sendEvent(canvas.viewport(), QMouseEvent(
            QEvent.Type.MouseMove, point, canvas.viewport().mapToGlobal(point), Qt.MouseButton.NoButton,
            Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier))
    qtbot.waitUntil(lambda: wire.hovered)
    assert not wire.label_rect(canvas.zoom).isEmpty()


@pytest.mark.parametrize("name", ["resnet18", "vit_tiny", "mobilenet_v2", "vgg11"])
def test_templates_open_at_fit_view_without_overlap(qtbot, name):
    canvas, _, _ = open_canvas(qtbot, name)
    assert not overlapping(canvas)
    assert canvas.zoom >= 0.6


def test_a_copied_stage_pastes_with_its_blocks_nested_and_undoes_in_one_step(qtbot):
    controller = EditorController(load_graph(TEMPLATES / "resnet18.graph.json"), QUndoStack())
    graph = controller.graph
    text = controller.copy([gid(controller, "layer2")], to_clipboard=False)
    before = (len(graph), len(graph.groups))
    new = controller.paste(text, at=(0.0, 2000.0))
    assert isinstance(new, list) and len(new) == len(graph.groups[gid(controller, "layer2")].nodes)
    pasted = [g for g in graph.groups.values() if set(g.nodes) <= set(new)]
    assert sorted((g.name, g.kind, len(g.nodes)) for g in pasted) == [
        ("layer2", "Sequential", 16), ("layer2.0", "BasicBlock", 9), ("layer2.1", "BasicBlock", 7)]
    controller.undo_stack.undo()
    assert (len(graph), len(graph.groups)) == before
    assert "copied group 0" in controller.paste('{"kind": "torch-studio-nodes", "version": 1, "nodes": '
                                        '[{"id": "a", "type": "ReLU"}], "groups": [{"name": "g", "nodes": ["b"]}]}')


def test_auto_layout_of_a_grouped_graph_places_open_blocks_without_overlap(qtbot):
    canvas, controller, _ = open_canvas(qtbot, "resnet18")
    graph = controller.graph
    for name in ("layer3", "layer3.1"):
        assert controller.set_collapsed(gid(controller, name), False) is None
    controller.move_nodes({"layer3_1_conv2": (-3000.0, 4000.0), "fc": (50.0, 60.0)})  # a mess
    assert overlapping(canvas) or graph.nodes["layer3_1_conv2"].position == (-3000.0, 4000.0)
    assert controller.auto_layout() is None
    assert not overlapping(canvas)
    frame = canvas.graph_scene.frames[gid(controller, "layer3.1")]
    assert frame.rect.contains(canvas.graph_scene.nodes["layer3_1_conv2"].sceneBoundingRect())
    assert canvas.graph_scene.frames[gid(controller, "layer3")].rect.contains(frame.rect)


def test_a_block_opened_by_double_click_is_brought_into_view(qtbot):
    canvas, controller, _ = open_canvas(qtbot, "resnet50")
    layer3 = gid(controller, "layer3")
    zoom = canvas.zoom
    QTest.mouseDClick(canvas.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                      at(canvas, canvas.graph_scene.boxes[layer3].sceneBoundingRect().center()))
    frame = canvas.graph_scene.frames[layer3]
    assert canvas.visible_rect().contains(frame.rect) and canvas.zoom <= zoom
    assert canvas.zoom > 0.38  # still drawn with text


@pytest.mark.slow
def test_close_all_puts_every_node_back_and_open_all_lays_the_blocks_out(qtbot):
    canvas, controller, _ = open_canvas(qtbot, "resnet18")
    graph = controller.graph
    start = {n: node.position for n, node in graph.nodes.items()}
    for name in ("layer2", "layer2.0", "layer3", "stem"):
        assert controller.set_collapsed(gid(controller, name), False) is None
    opened = {n: node.position for n, node in graph.nodes.items()}
    assert controller.set_all_collapsed(True) is None
    assert all(g.collapsed for g in graph.groups.values())
    assert {n: node.position for n, node in graph.nodes.items()} == start
    controller.undo_stack.undo()
    assert {n: node.position for n, node in graph.nodes.items()} == opened
    assert controller.set_all_collapsed(False) is None
    assert not any(g.collapsed for g in graph.groups.values()) and not overlapping(canvas)
    assert all(item.isVisible() for item in canvas.graph_scene.nodes.values())
    assert "already open" in controller.set_all_collapsed(False)


def test_a_block_is_renamed_from_its_menu_in_one_undo_step(qtbot):
    from graph_editor.ui.menus import context_actions

    canvas, controller, _ = open_canvas(qtbot, "vit_tiny")
    blocks = gid(controller, "blocks")
    box = canvas.graph_scene.boxes[blocks]
    actions = dict(context_actions(canvas, QPointF(at(canvas, box.sceneBoundingRect().center())),
                                   ask_name=lambda _canvas, current: f"{current} (12 layers)"))
    actions["Rename block…"]()
    assert controller.graph.groups[blocks].name == "blocks (12 layers)"
    assert canvas.graph_scene.boxes[blocks].name == "blocks (12 layers)"
    controller.undo_stack.undo()
    assert controller.graph.groups[blocks].name == "blocks"


def test_zoomed_far_out_a_block_still_shows_its_name(qtbot):
    canvas, controller, _ = open_canvas(qtbot, "mobilenet_v2")
    box = canvas.graph_scene.boxes[gid(controller, "stage2")]

    def text_pixels() -> int:
        image = canvas.grab().toImage()
        rect = canvas.mapFromScene(box.sceneBoundingRect()).boundingRect()
        text = canvas.graph_scene.theme.text
        return sum(1 for x in range(rect.left(), rect.right()) for y in range(rect.top(), rect.bottom())
                   if abs(image.pixelColor(x, y).lightness() - text.lightness()) < 20)

    canvas.zoom_at(0.25 / canvas.zoom, QPointF(canvas.viewport().rect().center()))
    canvas.centerOn(box)
    assert text_pixels() > 20  # the name, drawn large enough to read
    canvas.zoom_at(0.06 / canvas.zoom, QPointF(canvas.viewport().rect().center()))
    assert text_pixels() == 0  # a plain box


def test_breadcrumbs_say_where_the_selection_sits_and_lead_back_out(qtbot):
    canvas, controller, _ = open_canvas(qtbot, "resnet18")
    crumbs = canvas.breadcrumbs
    controller.select(["layer2_0_conv1"])  # inside a closed block: the canvas selects the block
    qtbot.waitUntil(lambda: crumbs.isVisible())
    assert [b.text() for b in crumbs.buttons] == ["Network", "layer2", "layer2.0"]
    canvas.zoom_at(2.0 / canvas.zoom, QPointF(0, 0))
    canvas.centerOn(QPointF(-5000, -5000))  # far from everything
    QTest.mouseClick(crumbs.buttons[1], Qt.MouseButton.LeftButton)
    layer2 = gid(controller, "layer2")
    assert controller.selection == [layer2]
    assert canvas.visible_rect().contains(canvas.graph_scene.boxes[layer2].sceneBoundingRect())
    qtbot.waitUntil(lambda: [b.text() for b in crumbs.buttons] == ["Network", "layer2"])
    assert all(b.width() > 0 and b.height() > 0 for b in crumbs.buttons)   # laid out, not 0x0
    QTest.mouseClick(crumbs.buttons[0], Qt.MouseButton.LeftButton)
    assert controller.selection == []
    qtbot.waitUntil(lambda: not crumbs.isVisible())
    controller.select([layer2])
    qtbot.waitUntil(crumbs.isVisible)
    controller.select(["input"])  # outside every block: no crumbs
    qtbot.waitUntil(lambda: not crumbs.isVisible())


def test_far_zoom_block_labels_tell_blocks_apart(qtbot, tmp_path):
    """Zoomed out (a map label per block), features.4 and features.6 read the same "featur..." (cut at
    the end at a fixed 12 px on screen although a smaller size fits): the labels now shrink to fit, or are
    cut in the middle, so the blocks' own pixels differ."""
    canvas, controller, _live = open_canvas(qtbot, "mobilenet_v2")
    controller.set_collapsed(gid(controller, "stage3"), False)
    canvas.resetTransform()
    canvas.scale(0.3, 0.3)
    boxes = canvas.graph_scene.boxes
    canvas.centerOn(boxes[gid(controller, "features.5")])
    qtbot.wait(50)
    shot = canvas.grab()
    shot.save(str(tmp_path / "far_labels.png"))

    def inside(name: str):
        rect = canvas.mapFromScene(boxes[gid(controller, name)].sceneBoundingRect()).boundingRect()
        return shot.copy(rect.adjusted(8, 8, -8, -8)).toImage()

    assert inside("features.4") != inside("features.6")


@pytest.mark.slow
def test_no_wire_runs_behind_a_closed_block(qtbot):
    """ResNet-18 with every block open but the head: the wires that wrap from layer3's end to layer4 ran
    their lane across the top of layer4's band (90 above the input they reach, which sits deep in its
    frames), behind the head block beside it. A wrapping wire runs in the gap above the frames it enters."""
    canvas, controller, _live = open_canvas(qtbot, "resnet18")
    controller.set_all_collapsed(False)
    controller.set_collapsed(gid(controller, "head"), True)
    qtbot.wait(20)
    scene = canvas.graph_scene
    behind = []
    for box_id, box in scene.boxes.items():
        if not box.isVisible():
            continue
        rect = box.sceneBoundingRect().adjusted(4, 4, -4, -4)
        for wire in scene.wires.values():
            if not wire.isVisible() or wire.src.parentItem() is box or wire.dst.parentItem() is box:
                continue
            path = wire.mapToScene(wire.curve())
            if any(rect.contains(path.pointAtPercent(k / 400)) for k in range(401)):
                behind.append((str(wire.edge), box_id))
    assert behind == []


def test_opening_a_block_inside_closed_ones_opens_them_first_and_overlaps_nothing(qtbot):
    """Room made for a block that is not drawn was made in the wrong place: MobileNetV2's blocks opened
    innermost first overlapped 71 pairs of nodes."""
    from graph_editor.model.hierarchy import ancestors

    canvas, controller, _ = open_canvas(qtbot, "mobilenet_v2")
    graph = controller.graph
    start = {n: node.position for n, node in graph.nodes.items()}
    deepest = sorted(graph.groups, key=lambda k: -len(ancestors(graph.groups, k)))
    inner = deepest[0]
    assert ancestors(graph.groups, inner) and graph.groups[inner].collapsed
    assert controller.set_collapsed(inner, False) is None           # one undo step opens it and its holders
    assert not any(graph.groups[k].collapsed for k in [inner, *ancestors(graph.groups, inner)])
    assert not overlapping(canvas)
    controller.undo_stack.undo()
    assert {n: node.position for n, node in graph.nodes.items()} == start and graph.groups[inner].collapsed


def test_one_output_into_a_closed_block_s_shared_input_is_one_wire(qtbot):
    """ResNet-18 with layer3 and layer4 open, layer4.0 closed: the graph has two edges from layer3's last
    ReLU into layer4.0 (to its conv1 and its downsample), and the block stands for both with one input.
    They were drawn as two wires on one another, each with its shape label; one wire shows, and it goes
    when both edges are cut."""
    canvas, controller, _ = open_canvas(qtbot, "resnet18")
    scene, graph = canvas.graph_scene, controller.graph
    for name in ("layer3", "layer3.1", "layer4"):   # opened by real double-clicks, each brought into view
        box = scene.boxes[gid(controller, name)]
        QTest.mouseDClick(canvas.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                          at(canvas, box.sceneBoundingRect().center()))
    block = scene.boxes[gid(controller, "layer4.0")]
    into = [e for e in graph.edges if e.src == "layer3_1_relu2" and e.dst.startswith("layer4_0")]
    assert {e.dst for e in into} == {"layer4_0_conv1", "layer4_0_downsample_0"}   # two edges, really
    shown = [w for e, w in scene.wires.items() if e in into and w.isVisible()]
    assert len(shown) == 1 and shown[0].dst.parentItem() is block and shown[0].label
    controller.delete([], [shown[0].edge])
    left = [w for e, w in scene.wires.items() if e.src == "layer3_1_relu2" and w.isVisible()]
    assert len(left) == 1 and left[0].dst.parentItem() is scene.boxes[gid(controller, "layer4.0")]   # the other's
