"""WorkerBridge against small real child processes speaking the event protocol."""

from __future__ import annotations

import sys

import pytest

from studio.training.bridge import WorkerBridge
from trainer import events as ev

pytestmark = pytest.mark.qt

SCRIPT = r"""
import sys, time
from trainer import events as ev
w = sys.stdout.write
w(ev.encode(ev.RUN_STARTED, 7, name="s", epochs=1, steps_per_epoch=3) + "\n")
w("this is not json\n")
w('{"no_event_key": 1}\n')
sys.stdout.flush()
cmd = sys.stdin.readline()          # the bridge's command arrives on stdin
w(ev.encode(ev.STATE, 7, state="paused", reason=cmd.strip()) + "\n")
for step in range(1, 2001):
    w(ev.encode(ev.METRICS, 7, step=step, epoch=1, loss=1.0, accuracy=0.5, lr=0.1, samples_per_s=1.0) + "\n")
END
"""


def _run(qtbot, tmp_path, end: str) -> tuple[WorkerBridge, dict]:
    bridge = WorkerBridge()
    seen: dict = {"metrics": 0, "crashed": None, "finished": None, "exit": None, "state": None}
    bridge.metrics.connect(lambda e: seen.__setitem__("metrics", seen["metrics"] + 1))
    bridge.crashed.connect(lambda r: seen.__setitem__("crashed", r))
    bridge.finished.connect(lambda e: seen.__setitem__("finished", e))
    bridge.state_changed.connect(lambda e: seen.__setitem__("state", e))
    bridge.exited.connect(lambda c: seen.__setitem__("exit", c))
    with qtbot.waitSignal(bridge.run_started, timeout=30_000):
        bridge.start("-", "", tmp_path / "w.log", command=[sys.executable, "-c", SCRIPT.replace("END", end)])
    assert bridge.run_id == 7
    assert bridge.pause()
    with qtbot.waitSignal(bridge.exited, timeout=30_000):
        pass
    return bridge, seen


def test_events_commands_and_a_clean_end(qtbot, tmp_path):
    finished = ev.encode(ev.FINISHED, 7, status="completed")
    bridge, seen = _run(qtbot, tmp_path, f"w({finished!r})  # last line without a newline")
    assert seen["metrics"] == 2000 and seen["exit"] == 0
    assert seen["state"]["reason"] == '{"command": "pause"}'
    assert seen["finished"]["status"] == "completed" and seen["crashed"] is None
    assert bridge.bad_lines == 2
    assert not bridge.send("stop")  # the process is gone: refused, not raised


def test_exit_without_an_end_event_is_a_crash_with_the_stderr_tail(qtbot, tmp_path):
    _bridge, seen = _run(qtbot, tmp_path, "sys.stdout.flush(); sys.stderr.write('CUDA error: boom\\n'); sys.exit(3)")
    assert seen["exit"] == 3 and seen["metrics"] == 2000
    assert seen["crashed"].startswith("the worker process exited with status 3")
    assert "CUDA error: boom" in seen["crashed"]
