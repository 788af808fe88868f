"""The status line of Record Memory Timeline (issue 22: "Recording the memory..." stayed in the status bar):
it lasts until the recording arrives and says so when the worker could not record. A real worker trains a tiny convnet in the real main window; the keys are Ctrl+Shift+M."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from graph_editor.model.serialize import graph_to_dict
from studio.training.hook import RECORDING
from tests.studio.training.test_memory_record import WAIT, window  # noqa: F401 - the window fixture
from tests.trainer.helpers import tiny_cnn
from trainer.protocol.events import MemoryTimeline

pytestmark = [pytest.mark.qt, pytest.mark.process]
KEYS = Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier


def test_the_recording_line_lasts_until_the_recording_and_says_why_none_came(qtbot, window):  # noqa: F811
    ctl = window.training.controller()
    bridge, status = ctl.session.bridge, window.statusBar()
    spec = {"name": "mem", "model": {"graph": graph_to_dict(tiny_cnn())}, "device": "cpu",
            "train": {"epochs": 500, "batch_size": 64}}
    with qtbot.waitSignal(bridge.run_started, timeout=WAIT):
        ctl.start(spec)
    window.activateWindow()
    with qtbot.waitSignal(bridge.memory_trace, timeout=WAIT):       # the worker's recording arrives
        QTest.keyClick(window, Qt.Key.Key_M, KEYS)
        assert status.currentMessage() == RECORDING
    assert status.currentMessage().startswith("Memory recorded: ")
    qtbot.waitUntil(lambda: ctl.dashboard.record_button.isEnabled(), timeout=WAIT)
    QTest.keyClick(window, Qt.Key.Key_M, KEYS)
    assert status.currentMessage() == RECORDING
    # a recording the worker could not make (its memory_trace event carries the reason) says so
    bridge.memory_trace.emit(MemoryTimeline(step=1, steps=0, error="cannot record: RuntimeError: busy"))
    assert status.currentMessage() == "Memory not recorded: cannot record: RuntimeError: busy"
    # the timeline tab keeps the recording before, and says that it is the earlier one
    title = ctl.dashboard.timeline.title.text()
    assert title.startswith("No timeline: cannot record: RuntimeError: busy. Below: the previous recording (steps ")
    with qtbot.waitSignal(ctl.session.ended, timeout=WAIT):
        qtbot.mouseClick(ctl.dashboard.stop_button, Qt.MouseButton.LeftButton)
