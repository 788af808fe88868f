"""Auto-layout (pure function) and template thumbnails."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import QRectF, QSize
from PySide6.QtWidgets import QGraphicsItem, QGraphicsScene

from graph_editor.model import Edge, Graph, load_graph
from graph_editor.model.layout import layered_layout
from graph_editor.ui.style import DARK
from graph_editor.ui.thumbnail import render_thumbnail

TEMPLATES = Path(__file__).resolve().parents[3] / "assets" / "templates"


def diamond() -> Graph:
    g = Graph()
    g.add_node("Input", "x", position=(0, 500))
    for i, n in enumerate(("a", "b", "c")):
        g.add_node("ReLU", n, position=(0, 100 * i))
        g.connect("x", n)
    g.add_node("Add", "sum", position=(0, 0))
    for n in ("a", "b", "c"):
        g.connect(n, "sum")
    g.add_node("Output", "out")
    g.connect("sum", "out")
    g.connect("x", "out")  # a long wire, across two columns
    return g


def test_layers_flow_left_to_right_without_overlap():
    g = diamond()
    pos = layered_layout(g, wrap=math.inf)
    for e in g.edges:
        assert pos[e.src][0] < pos[e.dst][0], e
    assert pos["a"][0] == pos["b"][0] == pos["c"][0]
    ys = sorted(pos[n][1] for n in "abc")
    assert all(b - a >= 80 for a, b in zip(ys, ys[1:], strict=False))


def test_crossings_are_reduced():
    g = Graph()
    g.add_node("Input", "x")
    for n, y in (("a", 0), ("b", 100)):
        g.add_node("ReLU", n, position=(0, y))
        g.connect("x", n)
    for n, y, src in (("c", 0, "b"), ("d", 100, "a")):  # drawn crossed
        g.add_node("ReLU", n, position=(0, y))
        g.connect(src, n)
    pos = layered_layout(g, wrap=math.inf)
    assert (pos["a"][1] < pos["b"][1]) == (pos["d"][1] < pos["c"][1])


def test_a_long_network_wraps_into_bands_and_keeps_its_corner():
    g = load_graph(TEMPLATES / "resnet18.graph.json")
    pos = layered_layout(g)
    xs, ys = [p[0] for p in pos.values()], [p[1] for p in pos.values()]
    assert (min(xs), min(ys)) == (0.0, 0.0)
    assert max(xs) < 4000 and len({round(y, -2) for y in ys}) > 4
    sub = layered_layout(g, ["conv1", "bn1", "relu"])
    assert set(sub) == {"conv1", "bn1", "relu"} and sub["conv1"][0] < sub["bn1"][0] < sub["relu"][0]


def test_cycles_do_not_stop_the_layout():
    g = Graph()
    g.add_node("ReLU", "a")
    g.add_node("ReLU", "b")
    g.connect("a", "b")
    g.add_edge(Edge("b", "a"), check=False)
    assert set(layered_layout(g)) == {"a", "b"}


def test_in_a_cycle_only_the_wire_back_to_an_earlier_node_runs_backwards():
    g = Graph()
    g.chain(("Input", "x"), ("ReLU", "a"), ("ReLU", "b"), ("ReLU", "c"), ("ReLU", "d"), ("Output", "out"))
    g.add_edge(Edge("d", "b"), check=False)  # a loop drawn from the end back into the middle
    pos = layered_layout(g, wrap=math.inf)
    assert [pos[n][0] for n in ("x", "a", "b", "c", "d", "out")] == sorted(pos[n][0] for n in pos)
    assert len({pos[n][0] for n in pos}) == 6  # one column each: the chain reads left to right


@pytest.mark.parametrize("name", ["lenet5", "resnet18"])
def test_thumbnail_draws_the_template(qtbot, name):
    g = load_graph(TEMPLATES / f"{name}.graph.json")
    before = [n.position for n in g]
    pixmap = render_thumbnail(g, QSize(240, 150))
    assert pixmap.size() == QSize(240, 150)
    image = pixmap.toImage()
    colours = {image.pixelColor(x, y).rgb() for x in range(0, 240, 3) for y in range(0, 150, 3)}
    assert len(colours) > 5 and DARK.background.rgb() in colours
    assert [n.position for n in g] == before  # the template itself is not moved


def test_qt_binding_keeps_none_alive(qtbot):
    """PySide6 6.12.0 under Python 3.11 dropped a reference to None on every void call,
    aborting the studio after a few thousand; pyproject pins a version below it."""
    class Item(QGraphicsItem):
        def boundingRect(self):
            return QRectF(0, 0, 1, 1)

        def paint(self, *args):
            pass

    scene = QGraphicsScene()
    item = Item()
    scene.addItem(item)
    before = sys.getrefcount(None)
    for i in range(200):
        item.setPos(i, i)
        item.update()
    assert sys.getrefcount(None) >= before - 5


@pytest.mark.parametrize("name", ["mlp", "resnet18", "mobilenet_v2", "vgg11"])
def test_a_thumbnail_keeps_its_wires_inside_the_picture(qtbot, name):
    """The gallery's pictures were fitted to the nodes only: the wires wrapping to the next band, which
    go out beyond the last node, were cut at the picture's edge. Nothing is drawn on its outer pixels."""
    image = render_thumbnail(load_graph(TEMPLATES / f"{name}.graph.json"), QSize(280, 150)).toImage()
    bg = image.pixelColor(0, 0)
    w, h = image.width(), image.height()
    border = [(x, y) for x in range(w) for y in (0, h - 1)] + [(x, y) for x in (0, w - 1) for y in range(h)]
    assert [p for p in border if image.pixelColor(*p) != bg] == []
