"""The training views in the real main window: the runs dock asks through the window's prompts,
and the dashboard's and runs dock's plots follow the studio's theme as it changes."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from studio.training.plot_theme import DARK, LIGHT

pytestmark = pytest.mark.qt


def _themes(controller) -> set[str]:
    dash = controller.dashboard
    views = [*dash.plots.values(), dash.confusion.matrix_view, dash.confusion.gallery, controller.runs.plot]
    return {view.theme.name for view in views}


@pytest.mark.slow
def test_training_views_follow_the_theme_and_the_runs_dock_asks_the_window(qtbot, window, prompts, tmp_path):
    window.set_theme("dark")              # the theme the window had before the training views existed
    window.training.show_runs()           # Run > Runs builds them
    controller = window.training.controller()
    assert _themes(controller) == {"dark"}
    window.theme_actions["light"].trigger()
    assert _themes(controller) == {"light"}
    plot = controller.dashboard.plots["loss"]
    assert plot.theme is LIGHT and plot.grab().toImage().pixelColor(3, 3).name() == LIGHT.background
    window.theme_actions["dark"].trigger()
    assert plot.theme is DARK and plot.grab().toImage().pixelColor(3, 3).name() == DARK.background

    store, runs = controller.store, controller.runs
    assert runs.prompts is prompts        # else a real message box would wait for a click
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    rid = store.create_run(name="old", spec={}, graph={"nodes": []}, graph_hash="0" * 64, device="cpu", params=1,
                           run_dir=str(run_dir))
    store.finish(rid, "completed")
    runs.refresh()
    runs.select_ids([rid])
    prompts.answer("delete_runs", False, True)
    qtbot.mouseClick(runs.buttons["Delete"], Qt.MouseButton.LeftButton)   # refused: nothing goes
    assert runs.row(rid) is not None and run_dir.is_dir()
    qtbot.mouseClick(runs.buttons["Delete"], Qt.MouseButton.LeftButton)
    assert runs.row(rid) is None and not run_dir.exists() and store.runs() == []
    assert prompts.asked("delete_runs") == [(f'run {rid} "old"',)] * 2
