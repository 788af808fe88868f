"""A real digits run from the studio window, inspected live from the Inspect workspace."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from graph_editor.model.serialize import graph_to_dict

from ..helpers import open_template

pytestmark = [pytest.mark.qt, pytest.mark.slow, pytest.mark.process]
WAIT = 90_000


def test_inspect_now_on_a_running_digits_run_fills_the_plot_and_the_overlay(window, qtbot, tmp_path):
    open_template(window, "digits_cnn")
    window.training.work_dir = Path(tmp_path) / "launches"
    controller = window.training.controller()
    spec = {"name": "inspected", "model": {"graph": graph_to_dict(window.controller.graph)}, "device": "cpu",
            "train": {"epochs": 200, "batch_size": 64}, "schedule": {"name": "constant"}}
    bridge = controller.session.bridge
    try:
        with qtbot.waitSignal(bridge.run_started, timeout=WAIT):
            controller.start(spec)
        button = window.workspaces.bar.widgetForAction(window.workspaces.items["Inspect"].action)
        QTest.mouseClick(button, Qt.MouseButton.LeftButton)
        ws = window.inspect.workspace
        qtbot.waitSignal(bridge.metrics, timeout=WAIT).wait()
        with qtbot.waitSignal(ws.reported, timeout=WAIT) as got:
            QTest.mouseClick(ws.inspect_button, Qt.MouseButton.LeftButton)
        report = got.args[0]
        assert report.step > 0 and [n.node for n in report.nodes][:3] == ["conv1", "bn1", "relu1"]
        assert ws.flow.bar_count() == 7 and ws.flow.step == report.step
        assert ws.metric.currentData() == "grad_w" and {"conv1", "fc"} <= set(ws.overlay.halos)
        assert ws.overlay.legend.isVisible() and "weight gradient" in ws.overlay.legend.title
        assert "Step" in ws.flow_status.text()
        with qtbot.waitSignal(controller.session.ended, timeout=WAIT):
            controller.session.stop()
    finally:
        if controller.session.is_running():
            os.killpg(bridge.pid, signal.SIGKILL)
