"""The Inspect workspace in a real main window, driven by real clicks and keys (offscreen)."""

from __future__ import annotations

import pytest
import torch
from PySide6.QtCore import QPoint, Qt
from PySide6.QtTest import QTest

from graph_editor.building import build_module
from trainer.inspection import inspected_step

from ..helpers import open_template


def _workspace(window):
    """Enter the Inspect workspace from its mode-bar button; its views are built then."""
    assert window.inspect.workspace is None        # nothing heavy built before the first entry
    button = window.workspaces.bar.widgetForAction(window.workspaces.items["Inspect"].action)
    QTest.mouseClick(button, Qt.MouseButton.LeftButton)
    assert window.workspaces.current == "Inspect"
    return window.inspect.workspace


def _click_item(view, item, at=None) -> None:
    """A real left click on ``item`` (at its local point ``at``, else its centre) in ``view``."""
    local = at if at is not None else item.boundingRect().center()
    view.ensureVisible(item, 10, 10)
    pos = view.mapFromScene(item.mapToScene(local))
    QTest.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, pos)


@pytest.mark.slow
def test_capture_blocks_overlay_and_selection_both_ways(window, qtbot):
    open_template(window, "digits_cnn")
    ws = _workspace(window)
    assert ws.backward_panel.isVisible() and ws.flow_panel.isVisible() and window.canvas.isVisible()
    ws.batch.selectAll()
    QTest.keyClicks(ws.batch, "16")
    with qtbot.waitSignal(ws.captured, timeout=60_000) as blocker:
        QTest.mouseClick(ws.capture_button, Qt.MouseButton.LeftButton)
    capture = blocker.args[0]
    assert capture.batch == 16 and len(capture.nodes) == 31
    blocks = ws.view.backward.blocks
    assert set(blocks) == set(capture.owners)
    # saved bytes on the design canvas: a halo per node that saves something, and the legend
    assert ws.metric.currentData() == "saved_bytes"
    assert {"relu1", "bn2", "pool"} <= set(ws.overlay.halos) and ws.overlay.legend.isVisible()
    assert "Saved for backward" in ws.overlay.legend.title
    # a click on a backward block selects the forward node on the design canvas
    _click_item(ws.view, blocks["bn2"])
    assert window.controller.selection == ["bn2"]
    # a click on the design canvas's node selects its backward block
    canvas = window.canvas
    item = canvas.graph_scene.nodes["conv3"]
    canvas.centerOn(item)
    QTest.mouseClick(canvas.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                     canvas.mapFromScene(item.mapToScene(item.boundingRect().center() + QPoint(0, 8))))
    assert window.controller.selection == ["conv3"]
    assert blocks["conv3"].isSelected() and not blocks["bn2"].isSelected()
    # a double-click opens a block in place, like a block of the design: its autograd nodes show
    view = ws.view
    QTest.mouseDClick(view.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                      view.mapFromScene(blocks["fc"].sceneBoundingRect().center()))
    assert "fc" in view.backward.frames and "fc" not in view.backward.boxes
    inside = [view.backward.nodes[n] for n in view.controller.graph.groups["fc"].nodes]
    assert sorted(i.title for i in inside) == ["AccumulateGrad", "AccumulateGrad", "AddmmBackward0", "TBackward0"]
    assert all(i.isVisible() for i in inside)
    # a click on an autograd node inside selects its graph node on the design canvas
    _click_item(view, inside[0])
    assert window.controller.selection == ["fc"]
    tip = view.backward.blocks["bn1"].toolTip()
    assert "NativeBatchNormBackward0" in tip and "shape" in tip and "float32" in tip


@pytest.mark.slow
def test_live_reports_fill_the_plot_overlay_and_flag_exploding(window, qtbot):
    open_template(window, "digits_cnn")
    ws = _workspace(window)
    torch.manual_seed(0)
    model = build_module(window.controller.graph, device="cpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(8, 1, 8, 8), torch.randint(0, 10, (8,))
    cpu = torch.device("cpu")
    _, _, healthy = inspected_step(model, opt, x, y, step=10, device=cpu, precision="fp32")
    ws.add_report(healthy)
    assert ws.flow.bar_count() == 7 and ws.metric.currentData() == "grad_w"   # 3 conv, 3 BN, 1 linear
    assert window.problems.count() == 0
    with torch.no_grad():
        model.fc.weight.mul_(1e6)                     # a deliberately broken init scale
    _, _, broken = inspected_step(model, opt, x, y, step=20, device=cpu, precision="fp32")
    ws.add_report(broken)
    texts = [window.problems.list.item(i).text() for i in range(window.problems.count())]
    assert any(t.startswith("conv1") and "exploding since step 20" in t for t in texts), texts
    # the metric box (keys) switches the overlay to the dead fraction
    ws.metric.setFocus()
    index = ws.metric.findData("zero_fraction")
    while ws.metric.currentIndex() != index:
        QTest.keyClick(ws.metric, Qt.Key.Key_Down if ws.metric.currentIndex() < index else Qt.Key.Key_Up)
    assert "Dead fraction" in ws.overlay.legend.title and "relu1" in ws.overlay.halos
    steps, _ = ws.history.series("conv1", "zero_fraction")
    assert steps == [10, 20]


@pytest.mark.slow
def test_a_finished_run_chosen_in_runs_is_inspected_from_the_store(window, qtbot, tmp_path):
    from trainer.inspection import InspectReport, NodeFigures
    from trainer.store.runs import RunStore

    store = RunStore(f"sqlite:///{tmp_path / 'runs.sqlite'}")
    run_id = store.create_run(name="done", spec={}, graph={}, graph_hash="h", device="cpu", params=1)
    for step, grad in ((100, 0.2), (200, 5e3)):
        report = InspectReport(step, None, "cpu", [NodeFigures("conv1", grad_out=0.1, grad_w=grad, weight=1.0),
                                                   NodeFigures("fc", grad_out=0.3, grad_w=0.4, weight=2.0)])
        store.add_metrics(run_id, report.metric_rows())
    store.finish(run_id, "completed")
    store.close()
    open_template(window, "digits_cnn")
    window.training.show_runs()
    panel = window.training.controller().runs
    panel.refresh()
    index = next(panel.proxy.index(r, 0) for r in range(panel.proxy.rowCount())
                 if panel.model.rows[panel.proxy.mapToSource(panel.proxy.index(r, 0)).row()].id == run_id)
    QTest.mouseClick(panel.table.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                     panel.table.visualRect(index).center())
    assert panel.selected_ids() == [run_id]
    ws = _workspace(window)
    assert [r.step for r in ws.history.reports] == [100, 200] and ws.flow.step == 200
    texts = [window.problems.list.item(i).text() for i in range(window.problems.count())]
    assert any(t.startswith("conv1") and "exploding since step 200" in t for t in texts), texts
    with qtbot.waitSignal(ws.captured, timeout=60_000):
        QTest.mouseClick(ws.capture_button, Qt.MouseButton.LeftButton)
    history = ws.view.backward.history   # the blocks' sparklines
    assert history["conv1"] == [0.2, 5e3] and history["relu1"] == []
    assert ws.view.backward.boxes["conv1"].stat_rows()[1] == ("||dL/dW||", "5e+03")


def test_capturing_a_broken_graph_says_why_and_keeps_the_last_capture(window, qtbot):
    open_template(window, "lenet5")
    ws = _workspace(window)
    with qtbot.waitSignal(ws.captured, timeout=60_000):
        QTest.mouseClick(ws.capture_button, Qt.MouseButton.LeftButton)
    blocks = set(ws.view.backward.blocks)
    graph = window.controller.graph
    edge = graph.in_edges("output")[0]
    graph.remove_edge(edge)                          # the Output is no longer fed
    QTest.mouseClick(ws.capture_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: ws.capture_button.isEnabled(), timeout=60_000)
    assert ws.capture_status.text().startswith("Cannot capture:") and "output" in ws.capture_status.text()
    assert set(ws.view.backward.blocks) == blocks


@pytest.mark.slow
def test_a_run_s_backward_time_shows_in_ms_and_one_inspection_spans_the_run(window, qtbot, tmp_path):
    from trainer.inspection import InspectReport, NodeFigures
    from trainer.store.runs import RunStore

    store = RunStore(f"sqlite:///{tmp_path / 'runs.sqlite'}")
    run_id = store.create_run(name="one", spec={}, graph={}, graph_hash="h", device="cpu", params=1)
    report = InspectReport(1845, None, "cpu", [NodeFigures("conv1", grad_out=0.1, grad_w=0.2, weight=1.0,
                                                           backward_s=0.00194)])
    store.add_metrics(run_id, report.metric_rows())
    store.finish(run_id, "completed")
    store.close()
    open_template(window, "digits_cnn")
    window.training.show_runs()
    panel = window.training.controller().runs
    panel.refresh()
    row = next(r for r in range(panel.proxy.rowCount())
               if panel.model.rows[panel.proxy.mapToSource(panel.proxy.index(r, 0)).row()].id == run_id)
    QTest.mouseClick(panel.table.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                     panel.table.visualRect(panel.proxy.index(row, 0)).center())
    ws = _workspace(window)
    with qtbot.waitSignal(ws.captured, timeout=60_000):
        QTest.mouseClick(ws.capture_button, Qt.MouseButton.LeftButton)
    ws.metric.setFocus()
    index = ws.metric.findData("backward_s")
    while ws.metric.currentIndex() != index:
        QTest.keyClick(ws.metric, Qt.Key.Key_Down if ws.metric.currentIndex() < index else Qt.Key.Key_Up)
    assert ws.view.backward.boxes["conv1"].stat_rows()[1] == ("time", "1.94 ms")
    _click_item(ws.view, ws.view.backward.boxes["conv1"])
    (x0, x1), _ = ws.spark.getPlotItem().vb.viewRange()
    assert x0 <= 0 and x1 >= 1845             # the one inspection, seen from the run's start


def test_opening_another_graph_clears_the_last_one_s_backward_graph_legend_and_plots(window, qtbot, prompts):
    from studio.resources import TEMPLATES

    window.resize(1440, 900)
    open_template(window, "digits_cnn")
    ws = _workspace(window)
    with qtbot.waitSignal(ws.captured, timeout=60_000):
        QTest.mouseClick(ws.capture_button, Qt.MouseButton.LeftButton)
    torch.manual_seed(0)
    model = build_module(window.controller.graph, device="cpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    _, _, report = inspected_step(model, opt, torch.randn(8, 1, 8, 8), torch.randint(0, 10, (8,)), step=10,
                                  device=torch.device("cpu"), precision="fp32")
    ws.add_report(report)
    assert ws.view.backward.boxes and ws.flow.bar_count() == 7 and ws.overlay.legend.isVisible()
    prompts.answer("open_path", str(TEMPLATES / "lenet5.graph.json"))
    window.activateWindow()
    QTest.keyClick(window, Qt.Key.Key_O, Qt.KeyboardModifier.ControlModifier)
    assert window.document.path.name == "lenet5.graph.json"
    assert ws.capture is None and not ws.view.backward.boxes and not ws.view.controller.graph.nodes
    assert ws.flow.bar_count() == 0, ws.flow.bar_count()
    assert not ws.overlay.halos, ws.overlay.halos
    assert not ws.overlay.legend.isVisible()
    assert ws.history.latest is None and ws.spark.curve.xData is None or len(ws.spark.curve.xData) == 0


@pytest.mark.slow
def test_the_heat_legend_takes_the_light_theme(window, qtbot):
    window.resize(1440, 900)
    open_template(window, "lenet5")
    ws = _workspace(window)
    with qtbot.waitSignal(ws.captured, timeout=60_000):
        QTest.mouseClick(ws.capture_button, Qt.MouseButton.LeftButton)
    legend = ws.overlay.legend
    assert legend.isVisible()

    def background() -> int:
        return legend.grab().toImage().pixelColor(legend.width() - 5, legend.height() // 2).lightness()

    assert background() < 100                          # dark theme: a dark box
    window.theme_actions["light"].trigger()            # View > Light Theme
    assert background() > 160                          # light theme: a light one, its text dark
    text = legend.palette().color(legend.foregroundRole())
    assert text.lightness() < 100


@pytest.mark.slow
def test_the_heat_legend_keeps_out_of_the_minimap(window, qtbot, tmp_path):
    """Both sat in the canvas's bottom-right corner: zoomed in (the minimap shows) the legend covered
    it. It moves left of the minimap while that shows, and back to the corner when it hides."""
    window.resize(1440, 900)
    open_template(window, "resnet18_cifar")
    ws = _workspace(window)
    with qtbot.waitSignal(ws.captured, timeout=120_000):
        QTest.mouseClick(ws.capture_button, Qt.MouseButton.LeftButton)
    canvas, legend = window.canvas, ws.overlay.legend
    QTest.mouseClick(window.workspaces.bar.widgetForAction(window.workspaces.items["Design"].action),
                     Qt.MouseButton.LeftButton)                       # the overlay stays on the design canvas
    canvas.zoom_at(3.0, canvas.viewport().rect().center().toPointF())   # part of the graph out of view
    qtbot.waitUntil(canvas.minimap.isVisible, timeout=5_000)

    def in_canvas(w) -> object:
        return w.geometry().translated(w.parentWidget().mapTo(canvas, w.parentWidget().rect().topLeft())) \
            if w.parentWidget() is not canvas else w.geometry()

    qtbot.waitUntil(lambda: not in_canvas(legend).intersects(in_canvas(canvas.minimap)), timeout=5_000)
    window.grab().save(str(tmp_path / "legend_minimap.png"))
    assert legend.isVisible()
    canvas.fit_view()                                                    # all in view: no minimap
    qtbot.waitUntil(lambda: not canvas.minimap.isVisible(), timeout=5_000)
    qtbot.waitUntil(lambda: legend.pos() == legend.corner(), timeout=5_000)
    assert legend.geometry().right() >= legend.parentWidget().width() - 13   # back in the corner
