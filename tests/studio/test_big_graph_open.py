"""Opening a big graph: no path of the window's walks the graph once per node."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest

from studio.docks.summary import SummaryDock


class CountedOrder(Sequence[str]):
    """A validation order that counts how often it is walked."""

    def __init__(self, ids: list[str]) -> None:
        self.ids, self.walks = ids, 0

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, index):  # type: ignore[no-untyped-def]
        return self.ids[index]

    def __iter__(self) -> Iterator[str]:
        self.walks += 1
        return iter(self.ids)

    def __contains__(self, item: object) -> bool:
        self.walks += 1
        return item in self.ids


def test_the_summary_walks_the_order_a_fixed_number_of_times(qapp):
    """It rebuilt ``set(order)`` for every node: 20,000 nodes took 44 s to open."""
    ids = [f"n{i}" for i in range(500)]
    order = CountedOrder(ids[:-5])                    # five nodes validation did not reach
    dock = SummaryDock()
    dock.show_inference({i: (4,) for i in ids[:10]}, dict.fromkeys(ids, "ReLU"), order)
    assert order.walks <= 2
    dock.show_analysis(None, [type("P", (), {"severity": "error"})()])
    assert [dock.model.rows[k].id for k in (0, 494, 499)] == ["n0", "n494", "n499"]
    dock.deleteLater()


@pytest.mark.slow   # a window and a 1,503-node file: ~1 s of CPU
def test_a_big_file_opens_with_few_items_and_a_node_chosen_in_the_summary_is_shown(window, tmp_path, qtbot):
    """File > Open of a 1,503-node chain: items only near the view (graph_editor/ui/unbuilt.py); a click on
    the summary's row of a node far off screen brings it into view, made and selected; saving writes the
    graph as it was opened."""
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    from graph_editor.model import Graph, InputSpec, load_graph, save_graph

    g = Graph(InputSpec((8,)), num_classes=2)
    g.chain(("Input", "input"), *[("ReLU", f"r{i}") for i in range(1500)], ("Linear", "fc", {"out_features": 2}),
            ("Output", "output"))
    for k, node in enumerate(g):
        node.position = (180.0 * k, 0.0)
    path = tmp_path / "chain.graph.json"
    save_graph(g, path)
    window.resize(1440, 900)
    assert window.files.open(str(path))
    canvas, scene, summary = window.canvas, window.canvas.graph_scene, window.summary
    qtbot.waitUntil(lambda: summary.model.rowCount() == len(g), timeout=10_000)
    canvas.viewport().grab()
    assert 0 < len(scene.nodes) < 100 and "r1400" not in scene.nodes   # the start of the row, legible
    row = next(k for k, r in enumerate(summary.model.rows) if r.id == "r1400")
    index = summary.model.index(row, 0)
    summary.table.scrollTo(index)
    QTest.mouseClick(summary.table.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                     summary.table.visualRect(index).center())
    assert window.controller.selection == ["r1400"]
    item = scene.nodes["r1400"]
    assert item.isSelected() and canvas.visible_rect().contains(item.sceneBoundingRect())
    canvas.viewport().grab()
    assert {"r1399", "r1401"} <= set(scene.nodes)   # its neighbours on screen, made when painted
    window.document.save(tmp_path / "saved.graph.json")
    assert (load_graph(tmp_path / "saved.graph.json").nodes.keys() == g.nodes.keys()
            and load_graph(tmp_path / "saved.graph.json").edges == g.edges)


@pytest.mark.slow   # a window and a 2,003-node file: ~1.5 s of CPU
def test_a_big_graph_s_verdict_is_made_off_the_gui_thread_and_never_shown_stale(window, tmp_path, qtbot):
    """The window showed a valid graph; a 2,003-node chain opened (validated off the GUI thread): until its
    verdict comes the status bar says "Checking…", not the old "valid"; an Inspector-style edit that breaks
    it says "Checking…" again at once, then "invalid", with the problem listed."""
    from graph_editor.model import Graph, InputSpec, save_graph
    from graph_editor.ui.live import LiveAnalysis

    qtbot.waitUntil(lambda: window.live.up_to_date, timeout=10_000)
    g = Graph(InputSpec((8,)), num_classes=2)
    g.chain(("Input", "input"), *[("ReLU", f"r{i}") for i in range(LiveAnalysis.BACKGROUND_FROM)],
            ("Linear", "fc", {"out_features": 2}), ("Output", "output"))
    for k, node in enumerate(g):
        node.position = (180.0 * k, 0.0)
    path = tmp_path / "chain.graph.json"
    save_graph(g, path)
    status = window.status.validity
    assert window.files.open(str(path))
    assert status.text() == "Checking…"                    # not the graph before's verdict
    qtbot.waitUntil(lambda: status.text().startswith("✔ valid"), timeout=20_000)
    window.controller.set_param("fc", "out_features", 3)   # 3 outputs for 2 classes
    assert status.text() == "Checking…" and not window.problems.list.isEnabled()
    qtbot.waitUntil(lambda: status.text().startswith("✖ invalid"), timeout=20_000)
    assert window.problems.list.isEnabled() and window.problems.count() >= 1
