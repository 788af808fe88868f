"""WorkerBridge against small real child processes speaking the event protocol, and the real worker."""

from __future__ import annotations

import gc
import json
import sys
import threading

import pytest

from graph_editor.model import Graph, InputSpec, save_graph
from studio.training.bridge import WorkerBridge
from trainer.protocol import events as ev

pytestmark = pytest.mark.qt

SCRIPT = r"""
import sys, time
from trainer.protocol import events as ev
w = sys.stdout.write
w(ev.RunStarted(run_id=7, name="s", epochs=1, steps_per_epoch=3).to_json() + "\n")
w("this is not json\n")
w('{"no_event_key": 1}\n')
sys.stdout.flush()
cmd = sys.stdin.readline()          # the bridge's command arrives on stdin
w(ev.State(run_id=7, state="paused", reason=cmd.strip()).to_json() + "\n")
for step in range(1, 2001):
    w(ev.Metrics(run_id=7, step=step, epoch=1, loss=1.0, accuracy=0.5, lr=0.1, samples_per_s=1.0).to_json() + "\n")
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


@pytest.mark.process
def test_events_commands_and_a_clean_end(qtbot, tmp_path):
    finished = ev.Finished(run_id=7, status="completed").to_json()
    bridge, seen = _run(qtbot, tmp_path, f"w({finished!r})  # last line without a newline")
    assert seen["metrics"] == 2000 and seen["exit"] == 0
    assert isinstance(seen["state"], ev.State) and seen["state"].reason == '{"command": "pause"}'
    assert isinstance(seen["finished"], ev.Finished) and seen["finished"].status == "completed"
    assert seen["crashed"] is None
    assert bridge.bad_lines == 2
    assert not bridge.send(ev.Stop())  # the process is gone: refused, not raised


@pytest.mark.process
def test_exit_without_an_end_event_is_a_crash_with_the_stderr_tail(qtbot, tmp_path):
    _bridge, seen = _run(qtbot, tmp_path, "sys.stdout.flush(); sys.stderr.write('CUDA error: boom\\n'); sys.exit(3)")
    assert seen["exit"] == 3 and seen["metrics"] == 2000
    assert seen["crashed"].startswith("the worker process exited with status 3")
    assert "CUDA error: boom" in seen["crashed"]


@pytest.mark.process
def test_an_unknown_event_from_a_newer_worker_is_passed_on(qtbot, tmp_path):
    bridge = WorkerBridge()
    seen: list = []
    bridge.event.connect(seen.append)
    script = ("import sys; sys.stdout.write('{\"event\": \"hologram\", \"run_id\": 3, \"step\": 4}\\n'"
              " + '{\"event\": \"finished\", \"run_id\": 3, \"status\": \"stopped\"}\\n')")
    with qtbot.waitSignal(bridge.exited, timeout=30_000):
        bridge.start("-", "", tmp_path / "w.log", command=[sys.executable, "-c", script])
    assert [e.event for e in seen] == ["hologram", "finished"]
    assert isinstance(seen[0], ev.UnknownEvent) and seen[0].extra == {"step": 4}
    assert bridge.run_id == 3 and bridge.ended


@pytest.mark.process
def test_the_real_worker_through_the_qt_adapter(qtbot, tmp_path):
    """Start, pause, set the learning rate, resume and stop the real worker, all through typed signals."""
    graph = Graph(InputSpec((1, 8, 8)), 10, {"name": "tiny"})
    graph.chain(("Input", "input"), ("Flatten", "flat"), ("Linear", "fc", {"out_features": 10}), ("Output", "output"))
    save_graph(graph, tmp_path / "net.graph.json")
    spec = {"schema_version": 1, "name": "bridge", "model": {"graph": str(tmp_path / "net.graph.json")},
            "train": {"epochs": 500, "batch_size": 64, "metrics_interval_s": 0.1}, "device": "cpu",
            "schedule": {"name": "constant"}}
    (tmp_path / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
    bridge = WorkerBridge()
    states: list[ev.State] = []
    bridge.state_changed.connect(states.append)
    with qtbot.waitSignal(bridge.run_started, timeout=60_000) as started:
        bridge.start(tmp_path / "spec.json", f"sqlite:///{tmp_path / 'runs.sqlite'}", tmp_path / "w.log",
                     cwd=tmp_path)
    info = started.args[0]
    assert isinstance(info, ev.RunStarted) and info.device == "cpu" and info.params == 650
    assert bridge.run_id == info.run_id is not None
    with qtbot.waitSignal(bridge.metrics, timeout=30_000) as first:
        pass
    assert isinstance(first.args[0], ev.Metrics) and first.args[0].step >= 1
    assert bridge.pause()
    qtbot.waitUntil(lambda: [s.state for s in states] == ["paused"], timeout=30_000)
    assert bridge.set_lr(0.0005) and bridge.resume()
    assert not bridge.set_lr(float("nan"))          # refused before it is sent
    with qtbot.waitSignal(bridge.metrics, timeout=30_000,
                          check_params_cb=lambda m: m.lr == pytest.approx(0.0005)):
        pass
    with qtbot.waitSignal(bridge.exited, timeout=60_000) as exited:
        assert bridge.stop()
    assert exited.args == [0] and bridge.ended
    assert [s.state for s in states] == ["paused", "running", "stopping"]


CHATTY = r"""
import sys, time
from trainer.protocol import events as ev
for step in range(1, 3001):
    sys.stdout.write(ev.Metrics(run_id=5, step=step, epoch=1, loss=1.0, accuracy=0.5, lr=0.1,
                                samples_per_s=1.0).to_json() + "\n")
    sys.stdout.flush()             # a chunk a line: the reader thread wakes for each
    if step % 100 == 0:
        time.sleep(0.01)
sys.stdout.write(ev.Finished(run_id=5, status="completed").to_json() + "\n")
"""


class _Cycle:
    def __init__(self) -> None:
        self.me = self


@pytest.mark.process
def test_the_reader_thread_never_runs_the_garbage_collector(qtbot, tmp_path):
    """The collector runs on whichever thread allocates; on the reader thread it would destroy the GUI's
    garbage Qt objects there while the GUI thread uses them (a segfault). While the worker is read,
    automatic collection is off and the GUI thread collects in its place."""
    qtbot.waitUntil(gc.isenabled, timeout=10_000)    # the earlier tests' reader threads have ended
    threads: list[str] = []
    automatic: list[bool] = []

    def seen(phase: str, info: dict) -> None:
        if phase == "start":
            threads.append(threading.current_thread().name)

    def metrics(event: ev.Metrics) -> None:
        automatic.append(gc.isenabled())
        for _ in range(50):
            _Cycle()            # garbage made on the GUI thread

    bridge = WorkerBridge()
    bridge.metrics.connect(metrics)
    gc.callbacks.append(seen)
    try:
        with qtbot.waitSignal(bridge.exited, timeout=60_000):
            bridge.start("-", "", tmp_path / "w.log", command=[sys.executable, "-c", CHATTY])
        qtbot.waitUntil(gc.isenabled, timeout=10_000)     # on again once this reader thread ended
    finally:
        gc.callbacks.remove(seen)
    assert bridge.ended and len(automatic) == 3000 and not any(automatic)
    assert threads and set(threads) == {threading.current_thread().name}, threads
