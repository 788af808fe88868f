"""How fast is the node canvas on big graphs? Printed figures, no asserts.

1. open + fit: a 300-node graph from its JSON text to a fitted, painted canvas (parse, items,
   validation, fit, first paint), against a plain QGraphicsScene of 300 rectangles with a
   text and a wire each (the least any Qt node view does).
2. repaint on pan/zoom: the viewport repainted after a pan step, at three zooms (fit: nodes
   drawn as blocks; 0.6x and 1x: every title, parameter and shape label), median of 30, and
   after a zoom step (every visible item redrawn at the new scale), against the plain scene
   at the same zoom. Goal: under 16 ms (one 60 Hz frame).
2b. the same with 2,000 nodes, all on screen (fitted: nodes drawn as coloured blocks, no text): the
   canvas draws such frames from tiles rendered between frames (graph_editor/ui/far_view.py), so the
   event loop runs, untimed, before each step, and what the tiles cost is printed after.
3. live shapes: in a 100-node graph, change the stem convolution's channels (every shape
   downstream changes) and time command -> validated -> items updated -> repainted, against
   the model's ``validate`` alone; also the path a person sees, with the ~40 ms debounce.
   Goal: under 100 ms.
4. a 20,000-layer chain (benchmarks/graph_load.py's): opened at 1x, then its first Fit View (Home) and the
   frame it paints, in CPU seconds of the GUI thread: far out, the nodes without items are drawn from the grid
   (graph_editor/ui/far_sketch.py), against the same canvas with every item made (what it cost before).
   Goal: well under 1 s. Then the tiles of that view, rendered between frames.

Offscreen Qt on this machine (timings on a shared 2-core CPU are noisy: medians are printed).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from PySide6.QtCore import QEventLoop, QPointF, QRectF, Qt, QTimer  # noqa: E402
from PySide6.QtGui import QColor, QPainterPath, QUndoStack  # noqa: E402
from PySide6.QtWidgets import (  # noqa: E402
    QApplication,
    QGraphicsPathItem,
    QGraphicsRectItem,
    QGraphicsScene,
    QGraphicsSimpleTextItem,
    QGraphicsView,
)

from benchmarks.graph_load import chain_text  # noqa: E402
from graph_editor.model import Graph, InputSpec, dumps, loads, validate  # noqa: E402
from graph_editor.model.layout import layered_layout  # noqa: E402
from graph_editor.ui.canvas import GraphCanvas  # noqa: E402
from graph_editor.ui.controller import EditorController  # noqa: E402
from graph_editor.ui.live import LiveAnalysis  # noqa: E402
from graph_editor.ui.scene import GraphScene  # noqa: E402

VIEW = (1400, 900)


def residual_net(nodes: int) -> Graph:
    """Input, a stem conv, then [BatchNorm2d, ReLU, Add(residual)] blocks up to ``nodes``, laid out."""
    g = Graph(InputSpec((3, 32, 32)), num_classes=10)
    g.add_node("Input", "input")
    g.add_node("Conv2d", "stem", {"out_channels": 16, "kernel_size": 3, "padding": 1})
    g.connect("input", "stem")
    prev, i = "stem", 0
    while len(g) < nodes - 4:
        i += 1
        g.chain(("BatchNorm2d", f"bn{i}"), ("ReLU", f"relu{i}"), ("Add", f"add{i}"), start=prev)
        g.connect(prev, f"add{i}")
        prev = f"add{i}"
    g.chain(("AdaptiveAvgPool2d", "pool", {"output_size": 1}), ("Flatten", "flat"),
            ("Linear", "fc", {"out_features": 10}), ("Output", "output"), start=prev)
    for node_id, pos in layered_layout(g).items():
        g.nodes[node_id].position = pos
    return g


def ms(seconds: float) -> str:
    return f"{seconds * 1000:7.1f} ms"


def plain_scene(graph: Graph) -> QGraphicsScene:
    scene = QGraphicsScene()
    for n in graph:
        rect = QGraphicsRectItem(QRectF(n.position[0], n.position[1], 150, 70))
        rect.setBrush(QColor("#2c2f35"))
        scene.addItem(rect)
        text = QGraphicsSimpleTextItem(n.type, rect)
        text.setPos(n.position[0] + 8, n.position[1] + 4)
    for e in graph.edges:
        a, b = graph.nodes[e.src].position, graph.nodes[e.dst].position
        path = QPainterPath(QPointF(a[0] + 150, a[1] + 30))
        path.cubicTo(QPointF(a[0] + 200, a[1] + 30), QPointF(b[0] - 50, b[1] + 30), QPointF(b[0], b[1] + 30))
        scene.addItem(QGraphicsPathItem(path))
    return scene


def open_canvas(text: str) -> GraphCanvas:
    controller = EditorController(loads(text), QUndoStack())
    live = LiveAnalysis(controller, analyze=False)
    canvas = GraphCanvas(controller, live)
    canvas.resize(*VIEW)
    canvas.show()
    live.refresh()
    canvas.fit_view()
    canvas.viewport().grab()
    return canvas


def open_plain(graph: Graph) -> QGraphicsView:
    scene = plain_scene(graph)
    view = QGraphicsView(scene)
    scene.setParent(view)  # the view does not own its scene
    view.resize(*VIEW)
    view.show()
    view.fitInView(view.scene().itemsBoundingRect(), Qt.AspectRatioMode.KeepAspectRatio)
    view.viewport().grab()
    return view


def timed(fn, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
        QApplication.processEvents()
    return statistics.median(times), result


def graph_rect(view: QGraphicsView) -> QRectF:
    """Around every node: the canvas's own measure (a big graph's nodes far out have no items: they are drawn
    from the grid), the scene's items for the plain scene."""
    return view.graph_scene.items_rect() if isinstance(view, GraphCanvas) else view.scene().itemsBoundingRect()


def repaint_median(view: QGraphicsView, zoom: float | None, repeat: int = 30) -> float:
    view.resetTransform()
    if zoom is None:
        view.fitInView(graph_rect(view), Qt.AspectRatioMode.KeepAspectRatio)
    else:
        view.scale(zoom, zoom)
        view.centerOn(QPointF(1200, 300))
    times = []
    settle(view)
    for k in range(repeat):
        bar = view.horizontalScrollBar()
        bar.setValue(bar.value() + (7 if k % 2 else -7))  # a pan step, then a repaint of the viewport
        settle(view)
        t0 = time.perf_counter()
        view.viewport().grab()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def settle(view: QGraphicsView) -> None:
    """Let the event loop run as it does between a person's frames: the zoomed-out canvas renders its
    tiles there (see far_tiles for what that costs), the plain scene does nothing."""
    view.viewport().grab()
    QApplication.processEvents()
    far = getattr(view, "far", None)
    while far is not None and far.filling():
        QApplication.processEvents()


def far_tiles(view: GraphCanvas) -> tuple[float, int]:
    """The zoomed-out canvas's tiles of the fitted view rendered anew (after an edit throughout): CPU
    seconds and how many tiles."""
    view.resetTransform()
    view.fitInView(graph_rect(view), Qt.AspectRatioMode.KeepAspectRatio)
    view.graph_scene.contents_changed(geometry=False)
    before, t0 = view.far.rendered, time.process_time()
    settle(view)
    return time.process_time() - t0, view.far.rendered - before


def zoom_step_median(view: QGraphicsView, repeat: int = 20, zoom: float = 0.6) -> float:
    """A wheel step at ``zoom``: every item is drawn anew at the new scale (item caches miss)."""
    view.resetTransform()
    view.scale(zoom, zoom)
    if zoom == 0.6:
        view.centerOn(QPointF(1200, 300))
    else:
        view.centerOn(graph_rect(view).center())
    times = []
    centre = QPointF(view.viewport().rect().center())
    settle(view)
    for k in range(repeat):
        factor = 1.1 if k % 2 else 1 / 1.1
        QApplication.processEvents()   # between two wheel steps the event loop turns (not long enough to settle)
        t0 = time.perf_counter()
        if isinstance(view, GraphCanvas):
            view.zoom_at(factor, centre)  # the wheel's path
        else:
            view.scale(factor, factor)
        view.viewport().grab()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def wait_inferred(live: LiveAnalysis) -> None:
    loop = QEventLoop()
    live.inferred.connect(loop.quit)
    QTimer.singleShot(2000, loop.quit)
    loop.exec()
    live.inferred.disconnect(loop.quit)


def live_shapes(canvas: GraphCanvas, repeat: int = 15) -> tuple[float, float, float, int]:
    controller, live, scene = canvas.controller, canvas.live, canvas.graph_scene
    direct, debounced, updated = [], [], 0
    for k in range(repeat):
        channels = 16 + 8 * ((k % 2) + 1)
        t0 = time.perf_counter()
        controller.set_param("stem", "out_channels", channels)
        live.refresh()
        canvas.viewport().grab()
        direct.append(time.perf_counter() - t0)
        updated = sum(item.shape_text.startswith(f"{channels}x") for item in scene.nodes.values())
        t0 = time.perf_counter()
        controller.set_param("stem", "out_channels", 16)
        wait_inferred(live)
        canvas.viewport().grab()
        debounced.append(time.perf_counter() - t0)
    baseline, _ = timed(lambda: validate(controller.graph), repeat)
    return statistics.median(direct), statistics.median(debounced), baseline, updated


def first_fit(text: str, lazy: bool) -> tuple[float, float, int]:
    """CPU seconds of the first Fit View and its frame of the graph in ``text`` (opened at 1x and painted
    first), those of the tiles rendered after it, and how many node items were made."""
    was = GraphScene.LAZY_FROM
    GraphScene.LAZY_FROM = was if lazy else None
    try:
        controller = EditorController(loads(text), QUndoStack())
        live = LiveAnalysis(controller, analyze=False)
        canvas = GraphCanvas(controller, live)
    finally:
        GraphScene.LAZY_FROM = was
    canvas.resize(*VIEW)
    canvas.show()
    live.refresh()
    canvas.resetTransform()
    canvas.centerOn(0, 0)
    canvas.viewport().grab()
    QApplication.processEvents()
    t0 = time.process_time()
    canvas.fit_view()
    canvas.viewport().grab()
    fit = time.process_time() - t0
    t0 = time.process_time()
    settle(canvas)
    tiles = time.process_time() - t0
    made = len(canvas.graph_scene.nodes)
    canvas.close()
    canvas.deleteLater()
    return fit, tiles, made


def main() -> None:
    app = QApplication.instance() or QApplication(sys.argv)
    big = residual_net(300)
    text = dumps(big)
    print(f"canvas speed, offscreen Qt, {VIEW[0]}x{VIEW[1]} view, shared 2-core CPU (noisy: medians)")
    t_open, canvas = timed(lambda: open_canvas(text), 5)
    t_plain, plain = timed(lambda: open_plain(big), 5)
    print(f"1. open+fit {len(big)} nodes, {len(big.edges)} wires: canvas {ms(t_open)}, plain scene {ms(t_plain)}, "
          f"ratio {t_open / t_plain:.1f}x   (goal < 1000 ms)")
    print("2. repaint after a pan step, 300 nodes (goal < 16 ms):")
    for label, zoom in (("fit", None), ("0.6x", 0.6), ("1.0x", 1.0)):
        ours, base = repaint_median(canvas, zoom), repaint_median(plain, zoom)
        print(f"   zoom {label:5s}: canvas {ms(ours)}, plain scene {ms(base)}, ratio {ours / base:.1f}x")
    ours, base = zoom_step_median(canvas), zoom_step_median(plain)
    print(f"   zoom step around 0.6x (items redrawn): canvas {ms(ours)}, plain scene {ms(base)}, "
          f"ratio {ours / base:.1f}x")
    many = residual_net(2000)
    crowd, crowd_plain = open_canvas(dumps(many)), open_plain(many)
    area = crowd.visible_rect()
    on_screen = sum(area.contains(crowd.graph_scene.node_rect_of(n)) for n in many.nodes)
    print(f"2b. {len(many):,} nodes all on screen (fit, zoom {crowd.zoom:.3f}; {on_screen:,} nodes in view, "
          f"{len(crowd.graph_scene.nodes):,} with items), goal < 16 ms:")
    ours, base = repaint_median(crowd, None), repaint_median(crowd_plain, None)
    print(f"   pan step: canvas {ms(ours)}, plain scene {ms(base)}, ratio {ours / base:.1f}x")
    ours, base = zoom_step_median(crowd, zoom=crowd.zoom), zoom_step_median(crowd_plain, zoom=crowd.zoom)
    print(f"   zoom step: canvas {ms(ours)}, plain scene {ms(base)}, ratio {ours / base:.1f}x")
    cost, tiles = far_tiles(crowd)
    print(f"   the canvas's {tiles} tiles of the view and the ring around it rendered after an edit (between "
          f"frames, one per event-loop turn): {ms(cost)} CPU in all, {ms(cost / max(tiles, 1))} each")
    small = open_canvas(dumps(residual_net(100)))
    direct, debounced, baseline, updated = live_shapes(small)
    print(f"3. parameter edit in a 100-node graph, {updated} node shapes changed:")
    print(f"   command -> items updated -> repainted: {ms(direct)} (validate alone {ms(baseline)}, "
          f"ratio {direct / baseline:.1f}x)")
    print(f"   as a person sees it, with the debounce: {ms(debounced)}   (goal < 100 ms)")
    chain = chain_text(20_000)
    fit, tiles, made = first_fit(chain, lazy=True)
    fit_all, tiles_all, made_all = first_fit(chain, lazy=False)
    print(f"4. first Fit View of a 20,000-layer chain, GUI CPU: drawn from the grid {ms(fit)} ({made} items made), "
          f"every item made {ms(fit_all)} ({made_all:,}), ratio {fit_all / fit:.1f}x   (goal well under 1 s)")
    print(f"   its tiles, rendered after the frame (between frames): {ms(tiles)} vs {ms(tiles_all)}")
    app.processEvents()


if __name__ == "__main__":
    main()
