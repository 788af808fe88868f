"""The memory timeline view: a real recorded trace stacked by node; a real click on a band selects its node."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtTest import QTest

from graph_editor.building import build_module
from studio.training.memory_timeline import MemoryTimelineView, band_at, stack
from tests.trainer.memory.test_memory_predict import template
from trainer.loop import make_train_step
from trainer.memory.timeline import record_job_steps
from trainer.optim import make_optimizer
from trainer.spec import OptimSpec

pytestmark = pytest.mark.qt


def _event() -> dict:
    g = template("digits_cnn")
    torch.manual_seed(0)
    model = build_module(g)
    opt = make_optimizer(model, OptimSpec())
    step, _ = make_train_step(model, opt, device=torch.device("cpu"), precision="fp32", label_smoothing=0.0)
    batch = (torch.randn(64, 1, 8, 8), torch.zeros(64, dtype=torch.long))
    step(*batch)
    s = record_job_steps(model, step, [batch, batch]).summary(max_points=400, top=5)
    return {"step": 2, **s}


def _shown(qtbot, event: dict) -> MemoryTimelineView:
    view = MemoryTimelineView()
    qtbot.addWidget(view)
    view.resize(820, 420)
    view.show()
    view.show_trace(event)
    return view


def _click_a_node_band(qtbot, view: MemoryTimelineView, event: dict) -> str:
    """Click, with the mouse, well inside the band of a node (not "other", not a phase); its node id."""
    t, names, tops = stack(event["timeline"])
    node = next(n for n in names if not n.startswith("(") and n != "other")
    k = names.index(node)
    thick = tops[k] - (tops[k - 1] if k else 0)
    steady = np.array([thick[max(j - 8, 0):j + 9].min() for j in range(len(t))])
    i = int(np.argmax(steady))                  # thick for a while: a pixel's rounding stays inside it
    lo = max((tops[k - 1][max(i - 8, 0):i + 9].max() if k else 0.0), 0.0)
    y = (lo + lo + steady[i]) / 2
    assert band_at(event["timeline"], t[i], y) == node
    vb = view.plot.getViewBox()
    vb.autoRange()                                               # ranges now, not at the next paint
    qtbot.wait(50)
    pos = view.plot.mapFromScene(vb.mapViewToScene(QPointF(t[i], y)))
    QTest.mouseClick(view.plot.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(pos.x(), pos.y()))
    return node


@pytest.mark.slow
def test_view_fills_and_a_click_on_a_band_selects_its_node(qtbot, tmp_path):
    event = _event()
    view = _shown(qtbot, event)
    qtbot.waitExposed(view)
    names = stack(event["timeline"])[1]
    assert len(view.bands) == len(names) == 6 and names[-1] == "other"
    assert "Steps 2-3: peak" in view.title.text()
    seen = []
    view.node_clicked.connect(seen.append)
    node = _click_a_node_band(qtbot, view, event)
    qtbot.waitUntil(lambda: bool(seen), timeout=5000)
    assert seen == [node]
    view.grab().save(str(tmp_path / "timeline.png"))


def test_an_event_with_an_error_is_said(qtbot):
    view = MemoryTimelineView()
    qtbot.addWidget(view)
    view.show_trace({"error": "recording the memory timeline on CUDA is not supported yet"})
    assert view.title.text().startswith("No timeline: recording") and not view.bands
    assert "previous" not in view.title.text()
    small = {"step": 4, "steps": 2, "peak_bytes": 10, "peak_phase": "forward", "peak_node": "fc", "attributed": 1.0,
             "timeline": {"t_ms": [0.0, 1.0], "live": [0, 10], "nodes": {"fc": [0, 10]}}}
    view.show_trace(small)
    view.show_trace({"error": "cannot record: busy"})     # a later recording failed: the earlier one stays, said so
    assert view.title.text() == "No timeline: cannot record: busy. Below: the previous recording (steps 4-5)."
    assert view.bands


@pytest.mark.slow
def test_the_canvas_selection_marks_its_band_and_clear_empties_the_view(qtbot):
    event = _event()
    view = MemoryTimelineView(theme="dark")
    qtbot.addWidget(view)
    view.show_trace(event)
    node = next(n for n in view.names if not n.startswith("(") and n != "other")
    view.highlight(["no-such-node", node])                # the first selected node that has a band
    k = view.names.index(node)
    assert view.highlighted == node and view.bands[k].opacity() == 0.75
    assert all(b.opacity() == 0.25 for i, b in enumerate(view.bands) if i != k)
    assert view.bands[k].pen().width() == 2
    view.set_plot_theme("light")                          # a redraw keeps the mark
    assert view.highlighted == node and view.bands[view.names.index(node)].opacity() == 0.75
    view.highlight([])
    assert view.highlighted is None and {b.opacity() for b in view.bands} == {0.75}
    view.clear()
    assert not view.bands and not view.names and view.title.text().startswith("No memory timeline yet")


@pytest.mark.slow
def test_the_timeline_stacks_by_phase_on_request(qtbot):
    event = _event()
    view = _shown(qtbot, event)
    assert view.by_box.isEnabled() and view.by == "nodes"
    QTest.keyClick(view.by_box, Qt.Key.Key_Down)          # by phase
    assert view.by == "phases"
    assert view.names == ["forward", "loss", "backward", "optimizer", "unattributed"]
    t, names, tops = stack(event["timeline"], "phases")
    assert np.allclose(tops[-1], np.asarray(event["timeline"]["live"]) / 2 ** 20)   # the phases add up
    i = int(np.argmax(tops[2] - tops[1]))                 # where the backward holds most
    y = (tops[1][i] + tops[2][i]) / 2
    assert band_at(event["timeline"], t[i], y, "phases") == "backward"
    seen = []
    view.node_clicked.connect(seen.append)
    vb = view.plot.getViewBox()
    vb.autoRange()
    qtbot.wait(50)
    pos = view.plot.mapFromScene(vb.mapViewToScene(QPointF(t[i], y)))
    QTest.mouseClick(view.plot.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(pos.x(), pos.y()))
    QTest.keyClick(view.by_box, Qt.Key.Key_Up)
    assert view.by == "nodes" and len(view.bands) == 6
    node = _click_a_node_band(qtbot, view, event)     # clicks arrive in order: this one's node comes after
    qtbot.waitUntil(lambda: bool(seen), timeout=5000)
    assert seen == [node]                                 # ...and the phase's click selected nothing
    old = {k: v for k, v in event["timeline"].items() if k != "phases"}
    view.show_trace({**event, "timeline": old})           # from a worker without phases: by layer only
    assert not view.by_box.isEnabled() and view.by == "nodes"


@pytest.mark.slow
def test_the_axes_read_in_their_own_units_below_one_mib_and_one_ms(qtbot):
    """pyqtgraph put an SI scale beside our units where the range is under 1: "live (MiB, above the
    start) (x0.001)" for a small model's recording."""
    view = _shown(qtbot, _event())
    view.plot.setXRange(0, 0.5, padding=0)
    view.plot.setYRange(0, 0.25, padding=0)
    qtbot.wait(20)
    for name in ("left", "bottom"):
        assert "(x" not in view.plot.getAxis(name).labelString()
