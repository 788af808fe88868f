"""Crash recovery with a real studio process that is killed: the edit it made a moment before is
offered at the next start (once only a minute's timer wrote, nothing was offered)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from studio.recovery import RecoveryStore

pytestmark = [pytest.mark.qt, pytest.mark.process]
ROOT = Path(__file__).resolve().parents[2]

EDIT_THEN_WAIT = """
import sys
from PySide6.QtCore import Qt, QTimer
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication
from studio.app import build
from studio.resources import TEMPLATES
from studio.settings import StudioSettings
from tests.studio.helpers import ScriptedPrompts

app = QApplication([])
folder = {folder!r}
window = build(app, StudioSettings.at(folder + "/settings.ini"), ScriptedPrompts(), folder + "/recovery",
               runs_db="sqlite:///" + folder + "/runs.sqlite")  # the app's own one-minute timer
window.show()
assert window.files.open(TEMPLATES / "lenet5.graph.json")
window.controller.select([])
app.processEvents()
classes = window.inspector.rows["num_classes"].editor
QTest.mouseClick(classes, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, classes.rect().center())
QTest.keyClick(classes, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
QTest.keyClicks(classes, "12")
QTest.keyClick(classes, Qt.Key.Key_Return)
print("edited", window.controller.graph.num_classes, flush=True)
sys.exit(app.exec())  # until it is killed
"""


def test_an_edit_made_just_before_a_kill_is_offered_at_the_next_start(make_window, prompts, tmp_path):
    script = textwrap.dedent(EDIT_THEN_WAIT.format(folder=str(tmp_path / "crashed")))
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT))
    child = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().split() == ["edited", "12"], child.stderr.read()
        recovery = tmp_path / "crashed" / "recovery"
        deadline = time.monotonic() + 30
        while not list(recovery.glob("recovery-*.graph.json")) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert list(recovery.glob("recovery-*.graph.json")), "nothing autosaved within 30 s of the edit"
    finally:
        child.send_signal(signal.SIGKILL)
        child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL

    window = make_window(recovery_dir=recovery)
    prompts.answer("recover", True)
    assert window.files.offer_recovery(window.s.recovery)
    assert "changes to" in prompts.asked("recover")[0][0] and "lenet5.graph.json" in prompts.asked("recover")[0][0]
    assert window.controller.graph.num_classes == 12
    assert window.isWindowModified()
    assert window.s.recovery.crashed() == []


def test_locks_left_by_sessions_that_ended_without_work_are_cleaned(tmp_path):
    folder = tmp_path / "recovery"
    gone = textwrap.dedent(f"""
        import os
        from studio.recovery import RecoveryStore
        store = RecoveryStore({str(folder)!r})  # holds its lock until the process dies
        os._exit(1)
    """)
    for _ in range(2):
        subprocess.run([sys.executable, "-c", gone], cwd=ROOT, check=False, timeout=60)
    assert len(list(folder.glob("recovery-*.lock"))) == 2
    store = RecoveryStore(folder)
    assert store.crashed() == []
    assert [p.name for p in folder.glob("recovery-*.lock")] == [f"recovery-{store.session}.lock"]
    store.release()
