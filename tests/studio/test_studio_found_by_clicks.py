"""The studio as a new user found it by real clicks (issue 22): each test drives the real window with
real events and fails on the defect it names."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from studio.resources import TEMPLATES
from studio.training.train_dialog import TrainDialog

pytestmark = pytest.mark.qt


@pytest.mark.parametrize("name", ["resnet18", "vit_tiny"])
def test_a_graph_opened_with_ctrl_o_is_fitted_whole_in_the_canvas(window, prompts, name):
    window.resize(1440, 900)
    QApplication.processEvents()
    prompts.answer("open_path", str(TEMPLATES / f"{name}.graph.json"))
    window.activateWindow()
    QTest.keyClick(window, Qt.Key.Key_O, Qt.KeyboardModifier.ControlModifier)
    QApplication.processEvents()
    shown, whole = window.canvas.visible_rect(), window.canvas.graph_scene.items_rect()
    assert shown.contains(whole), (name, shown, whole)   # fitted, not the first blocks zoomed in


def click_mode(window, name: str) -> None:
    button = window.workspaces.bar.widgetForAction(window.workspaces.items[name].action)
    QTest.mouseClick(button, Qt.MouseButton.LeftButton)
    QApplication.processEvents()


@pytest.mark.parametrize("width", [1280, 1400, 1440])
def test_the_train_workspace_keeps_its_window_s_width_whatever_the_run_says(window, width):
    """A long title, a failure's reason, or a first compile's line with its stage and an ETA: the window
    keeps its width and every control shows whole (at 1280 the compile line widened it to 1,367 px, with
    Record memory past a 1280 px screen's edge)."""
    from trainer.protocol import events as ev

    window.resize(width, 800)
    click_mode(window, "Train")
    dash = window.training.controller().dashboard
    dash.begin_run("resnet18_cifar_with_a_long_name  ·  run 1234  ·  cuda:0 (NVIDIA H100 80GB HBM3)", 1000, 1e-3)
    dash.set_state("running")
    dash.set_controls_enabled(True)
    dash.compile_started(first_time=True)
    dash.compile_progress(ev.CompileProgress(stage="aot_autograd backward of graph 3 of the training step", compiled=4))
    dash.eta_label.setText("ETA 12 min 40 s")
    QApplication.processEvents()
    assert window.width() == width and window.minimumSizeHint().width() <= width
    assert dash.compile_label.toolTip().startswith("Compiling (first time)...")   # the whole line, on hover
    for control in (dash.pause_button, dash.stop_button, dash.lr_box, dash.lr_button, dash.record_button):
        assert control.visibleRegion().boundingRect().width() == control.width() >= control.sizeHint().width()
    reason = "worker exited with status 1: RuntimeError: " + "CUDA error: an illegal memory access " * 4
    dash.set_state(f"failed: {reason}", running=False)
    QApplication.processEvents()
    assert window.width() == width and window.minimumSizeHint().width() <= width
    assert dash.state.toolTip() == f"failed: {reason}"      # the whole reason, on hover
    assert dash.pause_button.visibleRegion().boundingRect().width() == dash.pause_button.width()


def test_the_dashboard_preview_opens_within_the_screen(qapp):
    from studio.training.__main__ import window_size

    room = qapp.primaryScreen().availableGeometry()
    w, h = window_size(qapp, None)
    assert w <= room.width() and h <= room.height()
    assert window_size(qapp, "1280x800") == (1280, 800)


def test_opening_and_closing_a_block_leaves_the_file_saved_and_undo_still_works(window, prompts):
    from PySide6.QtCore import QPointF

    window.resize(1440, 900)
    prompts.answer("open_path", str(TEMPLATES / "resnet18.graph.json"))
    window.activateWindow()
    QTest.keyClick(window, Qt.Key.Key_O, Qt.KeyboardModifier.ControlModifier)
    canvas, graph = window.canvas, window.controller.graph
    layer2 = next(k for k, g in graph.groups.items() if g.name == "layer2")
    box = canvas.graph_scene.boxes[layer2]
    canvas.centerOn(box)
    QTest.mouseDClick(canvas.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                      canvas.mapFromScene(box.sceneBoundingRect().center()))
    assert not graph.groups[layer2].collapsed
    assert not window.document.dirty and not window.isWindowModified()
    title = canvas.graph_scene.frames[layer2].header_rect()
    canvas.centerOn(title.center())
    QTest.mouseDClick(canvas.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                      canvas.mapFromScene(QPointF(title.left() + 30, title.center().y())))
    assert graph.groups[layer2].collapsed
    assert not window.document.dirty and not window.isWindowModified()
    QTest.keyClick(window, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)   # the open is still undoable
    assert not graph.groups[layer2].collapsed and not window.document.dirty
    window.controller.select([next(iter(graph.nodes))])
    window.canvas.delete_selection()                                           # an edit of the network
    assert window.document.dirty and window.isWindowModified()


def _arrow_points_down(header, section: int) -> bool:
    """Whether the sort arrow (the rightmost mark in ``section``) is wider at its top than at its foot."""
    image = header.grab().toImage()
    left = header.sectionViewportPosition(section)
    right = left + header.sectionSize(section) - 1
    background = image.pixelColor(right - 2, 1).lightness()

    def marked(x: int, y: int) -> bool:
        return abs(image.pixelColor(x, y).lightness() - background) > 40

    columns = [x for x in range(left, right) if any(marked(x, y) for y in range(image.height()))]
    arrow = [columns[-1]]
    for x in reversed(columns[:-1]):          # the run of marked columns at the right end
        if x != arrow[-1] - 1:
            break
        arrow.append(x)
    widths = [n for y in range(image.height()) if (n := sum(marked(x, y) for x in arrow))]
    assert len(widths) >= 2, "no sort arrow drawn"
    return widths[0] > widths[-1]


@pytest.mark.slow
def test_the_runs_sort_arrow_points_the_way_the_column_is_sorted(window):
    window.resize(1440, 900)
    click_mode(window, "Runs")
    header = window.training.controller().runs.table.horizontalHeader()
    assert header.sortIndicatorOrder() == Qt.SortOrder.DescendingOrder    # newest first
    assert _arrow_points_down(header, header.sortIndicatorSection())
    section = header.sortIndicatorSection()
    QTest.mouseClick(header.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                     header.rect().topLeft() + QPoint(header.sectionViewportPosition(section) + 10, 8))
    assert header.sortIndicatorOrder() == Qt.SortOrder.AscendingOrder
    assert not _arrow_points_down(header, section)


@pytest.mark.slow
def test_a_run_is_named_as_the_cli_names_it_and_the_next_train_dialog_forgets_the_last_name(window, prompts,
                                                                                          qtbot):
    import argparse

    from studio import cli_train

    template = TEMPLATES / "digits_cnn.graph.json"
    prompts.answer("template", template)
    window.activateWindow()
    QTest.keyClick(window, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    assert window.document.name == "Digits CNN"          # the title says what the template is
    ctl = window.training.controller()
    started: list[dict] = []
    ctl.session.start = lambda spec, predicted_peak=None, unmodelled=0: started.append(spec) or 1   # the worker itself is not what is tested here
    parser = argparse.ArgumentParser()
    cli_train.register(parser.add_subparsers())
    cli_name = cli_train.build_spec(parser.parse_args(["train", str(template)]))["name"]
    for typed in ("first try", ""):
        QTest.mouseClick(window.toolbar.widgetForAction(window.training.train_action), Qt.MouseButton.LeftButton)
        [dialog] = [d for d in window.findChildren(TrainDialog) if d.isVisible()]
        qtbot.waitUntil(lambda d=dialog: d.start_button.isEnabled(), timeout=60_000)
        assert dialog.form.editors["name"].text() == ""      # not the last run's name
        QTest.keyClicks(dialog.form.editors["name"], typed)
        QTest.mouseClick(dialog.start_button, Qt.MouseButton.LeftButton)
        assert not dialog.isVisible()
    assert [s["name"] for s in started] == ["first try", cli_name] and cli_name == "digits_cnn"


def test_the_minimap_comes_and_goes_as_the_canvas_is_resized(window, qtbot):
    from .helpers import open_template

    window.resize(1900, 1200)
    open_template(window, "digits_cnn")
    QApplication.processEvents()
    minimap = window.canvas.minimap
    assert window.canvas.visible_rect().contains(window.canvas.graph_scene.items_rect())
    qtbot.waitUntil(lambda: not minimap.isVisible(), timeout=2000)
    window.resize(1200, 800)                           # part of the graph leaves the view: the map comes
    qtbot.waitUntil(minimap.isVisible, timeout=2000)
    window.resize(1900, 1200)                          # all of it in view again: the map goes
    qtbot.waitUntil(lambda: not minimap.isVisible(), timeout=2000)


def test_no_minimap_over_a_canvas_too_small_to_hold_it(window, qtbot):
    from .helpers import open_template

    window.resize(720, 720)                   # docks around leave the canvas about 150 px wide
    open_template(window, "resnet18")
    QApplication.processEvents()
    canvas = window.canvas
    assert canvas.viewport().width() < 3 * canvas.minimap.width()
    assert not canvas.visible_rect().contains(canvas.graph_scene.items_rect())   # a map would be needed...
    window.resize(1440, 900)                  # room for it, and zoomed in: it shows
    qtbot.waitUntil(lambda: canvas.viewport().width() >= 3 * canvas.minimap.width(), timeout=5_000)
    canvas.zoom_at(3.0, canvas.viewport().rect().center().toPointF())
    qtbot.waitUntil(canvas.minimap.isVisible, timeout=5_000)
    window.resize(720, 720)
    assert canvas.viewport().width() < 3 * canvas.minimap.width()
    assert not canvas.visible_rect().contains(canvas.graph_scene.items_rect())
    qtbot.waitUntil(lambda: not canvas.minimap.isVisible(), timeout=5_000)   # ...but it would cover most of the nodes
