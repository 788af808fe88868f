"""Record memory from the studio: a real worker trains the digits CNN, the dashboard's button asks it for a
memory timeline, the timeline fills, a click on a band selects its node on the canvas and the canvas's
selection shows on the band."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtTest import QTest

from studio.training.memory_timeline import band_at, stack

pytestmark = [pytest.mark.qt, pytest.mark.slow, pytest.mark.process]
WAIT = 90_000
DIGITS_CNN = Path(__file__).resolve().parents[3] / "assets" / "templates" / "digits_cnn.graph.json"


class _NoQuestions:
    """The studio's prompts; none is expected."""

    def __getattr__(self, name):
        def asked(*args):
            raise AssertionError(f"the studio unexpectedly asked {name}{args}")
        return asked


@pytest.fixture
def window(qapp, tmp_path):
    """The real main window (studio.app.build) editing the digits CNN; its worker killed afterwards."""
    from studio.app import build
    from studio.settings import StudioSettings

    win = build(qapp, StudioSettings.at(tmp_path / "settings.ini"), _NoQuestions(), tmp_path / "recovery",
                autosave_ms=3_600_000, runs_db=f"sqlite:///{tmp_path / 'runs.sqlite'}", blocks_dir=tmp_path / "blocks")
    win.training.work_dir = tmp_path / "launches"
    win.resize(1400, 900)
    win.show()
    assert win.files.open(DIGITS_CNN)
    yield win
    hook = win.training
    if hook.built and hook.controller().session.is_running():
        os.killpg(hook.controller().session.bridge.pid, signal.SIGKILL)
    win.document.undo_stack.setClean()
    win.close()


def _band_point(timeline: dict, node: str) -> tuple[float, float]:
    """A point well inside ``node``'s band, where it stays thick for a while (pixel rounding stays in it)."""
    t, names, tops = stack(timeline)
    k = names.index(node)
    below = tops[k - 1] if k else np.zeros_like(t)
    thick = tops[k] - below
    steady = np.array([thick[max(j - 8, 0):j + 9].min() for j in range(len(t))])
    i = int(np.argmax(steady))
    lo = max(float(below[max(i - 8, 0):i + 9].max()), 0.0)
    return float(t[i]), lo + steady[i] / 2


def test_record_memory_fills_the_timeline_and_a_band_selects_its_node(qtbot, window, tmp_path):
    from graph_editor.model.serialize import graph_to_dict, load_graph

    ctl = window.training.controller()
    spec = {"name": "mem", "model": {"graph": graph_to_dict(load_graph(DIGITS_CNN))}, "device": "cpu",
            "train": {"epochs": 60, "batch_size": 64}}
    with qtbot.waitSignal(ctl.session.bridge.run_started, timeout=WAIT):
        ctl.start(spec)
    dash = ctl.dashboard
    assert ctl.dashboard_dock.isVisible() and dash.record_button.isEnabled()
    with qtbot.waitSignal(ctl.session.bridge.memory_trace, timeout=WAIT) as got:
        window.activateWindow()     # Run > Record Memory Timeline, by its keys: the status line says so
        QTest.keyClick(window, Qt.Key.Key_M, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
        assert dash.record_button.text() == "Recording..." and not dash.record_button.isEnabled()
        assert window.statusBar().currentMessage().startswith("Recording the memory")
    event = got.args[0]
    qtbot.waitUntil(lambda: window.statusBar().currentMessage().startswith("Memory recorded"), timeout=5000)
    assert event.error is None and event.steps == 2 and event.attributed >= 0.99
    assert Path(event.path).is_file()
    view = dash.timeline
    assert dash.side.currentWidget() is view                # the tab came forward
    qtbot.waitUntil(lambda: dash.record_button.isEnabled(), timeout=5000)
    names = stack(event.timeline)[1]
    assert len(view.bands) == len(names) >= 3 and "Steps" in view.title.text()
    graph_nodes = set(window.controller.graph.nodes)
    node = next(n for n in names if n in graph_nodes)
    t, y = _band_point(event.timeline, node)
    assert band_at(event.timeline, t, y) == node
    vb = view.plot.getViewBox()
    vb.autoRange()
    qtbot.wait(50)
    pos = view.plot.mapFromScene(vb.mapViewToScene(QPointF(t, y)))
    window.controller.select([])
    QTest.mouseClick(view.plot.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(pos.x(), pos.y()))
    qtbot.waitUntil(lambda: window.controller.selection == [node], timeout=5000)
    assert view.highlighted == node                          # the canvas's selection marks its band
    k = view.names.index(node)
    assert view.bands[k].opacity() > view.bands[(k + 1) % len(view.bands)].opacity()
    other = next(n for n in names if n in graph_nodes and n != node)
    window.controller.select([other])                        # selected on the canvas: its band is marked
    assert view.highlighted == other
    window.controller.select([])
    assert view.highlighted is None and len({b.opacity() for b in view.bands}) == 1
    memory = dash.plots["memory"]                          # the run's predicted peak, computed on a thread
    qtbot.waitUntil(lambda: memory.level("predicted") is not None, timeout=WAIT)
    assert memory.level("predicted").label.toPlainText().startswith("predicted tensors ")
    window.workspaces.show("Train")
    window.grab().save(str(tmp_path / "record.png"))
    with qtbot.waitSignal(ctl.session.ended, timeout=WAIT):
        qtbot.mouseClick(dash.stop_button, Qt.MouseButton.LeftButton)
    assert dash.record_button.text() == "Record memory" and not dash.record_button.isEnabled()


def test_the_run_menu_action_says_when_no_run_is_going(qtbot, window):
    window.training.record_action.trigger()
    assert window.statusBar().currentMessage() == "No run is training: Train (Ctrl+T) starts one."
    assert window.training.controller().dashboard.timeline.bands == []
