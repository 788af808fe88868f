"""The one worker client against the real worker: the CLI's path, typed events, and a command channel
that no malformed line can end (issue 18, D6)."""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time
from pathlib import Path

import pytest

from graph_editor.model import Graph, InputSpec, save_graph
from studio import cli_train
from trainer.protocol import events as ev
from trainer.protocol.client import WorkerClient

pytestmark = pytest.mark.process


def small_spec(folder: Path, **train: object) -> Path:
    """A 650-parameter linear model on the embedded digits, one epoch unless ``train`` says otherwise."""
    graph = Graph(InputSpec((1, 8, 8)), 10, {"name": "linear"})
    graph.chain(("Input", "input"), ("Flatten", "flat"), ("Linear", "fc", {"out_features": 10}), ("Output", "output"))
    save_graph(graph, folder / "net.graph.json")
    spec = {"schema_version": 1, "name": "client", "model": {"graph": str(folder / "net.graph.json")},
            "train": {"epochs": 1, "batch_size": 64, "metrics_interval_s": 0.1, **train}, "device": "cpu",
            "schedule": {"name": "constant"}}
    path = folder / "spec.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    return path


def test_cli_train_runs_the_real_worker_through_the_client(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    cli_train.register(parser.add_subparsers())
    small_spec(tmp_path)
    args = parser.parse_args(["train", str(tmp_path / "net.graph.json"), "--epochs", "2", "--device", "cpu",
                              "--db", f"sqlite:///{tmp_path / 'runs.sqlite'}", "--json-events"])
    assert args.func(args) == 0
    lines = capsys.readouterr().out.splitlines()
    events = [ev.Event.from_json(line) for line in lines]
    assert [type(e) for e in events[:1]] == [ev.RunStarted] and isinstance(events[-1], ev.Finished)
    assert [e.epoch for e in events if isinstance(e, ev.EpochEnd)] == [1, 2]
    # every field the worker sends is declared by its dataclass: nothing lands in ``extra``
    assert [(e.event, e.extra) for e in events if e.extra or isinstance(e, ev.UnknownEvent)] == []
    end = next(e for e in events if isinstance(e, ev.EpochEnd))
    assert isinstance(end.per_class, ev.PerClass) and len(end.per_class) == 10 == len(end.confusion or [])
    assert events[-1].status == "completed" and events[-1].best is not None

    # the same events drive the progress lines and the outcome the CLI prints without --json-events
    out = io.StringIO()
    bar = cli_train.Progress(out)
    for e in events:
        bar.update(e)
    printed = out.getvalue().splitlines()
    assert printed[0].startswith(f"run {events[0].run_id} on cpu: 650 parameters")
    assert printed[1].startswith("epoch 1/2: train loss ") and printed[2].startswith("epoch 2/2: ")
    cli_train.print_outcome(events[-1], "")
    outcome = capsys.readouterr().out
    assert f"run {events[0].run_id} completed after 2 epoch(s)" in outcome and "test accuracy" in outcome


BAD_LINES = [
    b'{"command": "set_lr", "lr": ' + b"9" * 400 + b"}\n",       # OverflowError converting to float
    b"[" * 100_000 + b"]" * 100_000 + b"\n",                       # RecursionError, and too long
    b"[" * 1500 + b"]" * 1500 + b"\n",                             # RecursionError within the length limit
    b'{"command": "\xff\xfe"}\n',                                  # not UTF-8
    b'{"command": "set_lr", "lr": NaN}\n',
    b"not json at all\n",
    b'{"command": "explode"}\n',
]


def test_malformed_commands_never_end_the_command_channel(tmp_path):
    spec = small_spec(tmp_path, epochs=500)
    with WorkerClient.run(spec, db=f"sqlite:///{tmp_path / 'runs.sqlite'}") as w:
        stream = w.events(timeout=60)
        assert isinstance(next(stream), ev.RunStarted)
        next(e for e in stream if isinstance(e, ev.Metrics))
        assert w.proc.stdin is not None
        for line in BAD_LINES:
            w.proc.stdin.write(line)
        w.proc.stdin.flush()
        assert w.pause()
        state = next(e for e in stream if isinstance(e, ev.State))
        assert state.state == "paused"
        assert w.set_lr(0.0007) and w.resume_training()
        assert next(e for e in stream if isinstance(e, ev.State)).state == "running"
        # the new rate shows in a later window (the one pending at the pause still has the old one)
        next(e for e in stream if isinstance(e, ev.Metrics) and e.lr == pytest.approx(0.0007))
        assert w.stop()
        rest = list(stream)
        assert isinstance(rest[-1], ev.Finished) and rest[-1].status == "stopped"
        assert [e for e in rest if e.extra or isinstance(e, ev.UnknownEvent)] == []
        assert w.wait(60) == 0
    refused = [ln for ln in w.stderr.splitlines() if ln.startswith("trainer: ignoring command")]
    assert len(refused) == len(BAD_LINES), w.stderr
    assert "too large" in refused[0] and "longer than" in refused[1] and "nested too deep" in refused[2]
    assert "Traceback" not in w.stderr


def test_client_reports_a_crash_with_the_stderr_tail(tmp_path):
    script = "import sys; print('{\"event\": \"state\", \"state\": \"x\"}'); print('boom', file=sys.stderr); sys.exit(3)"
    w = WorkerClient([], command=[sys.executable, "-c", script], log_path=tmp_path / "w.log")
    events = list(w.events(timeout=30))
    assert [type(e) for e in events] == [ev.State] and not w.ended
    assert w.exit_code == 3
    assert w.crash_reason(3) == "the worker process exited with status 3 without reporting an end\nboom"


def test_a_refused_spec_is_one_typed_failed_event_before_run_started(tmp_path):
    spec = small_spec(tmp_path, epochs=0)
    with WorkerClient.run(spec, db=f"sqlite:///{tmp_path / 'runs.sqlite'}") as w:
        events = list(w.events(timeout=60))
        assert w.wait(60) == ev.EXIT_REFUSED
    assert len(events) == 1 and isinstance(events[0], ev.Failed) and w.ended
    failed = events[0]
    assert failed.kind == "spec" and failed.run_id is None and failed.extra == {}
    assert failed.problems and failed.problems[0].startswith("train.epochs")
    assert w.run_id is None and w.exit_code == ev.EXIT_REFUSED


FLOOD = r"""
import sys
from trainer.protocol import events as ev
line = ev.Metrics(run_id=1, step=1, epoch=1, loss=1.0, accuracy=0.5, lr=0.1, samples_per_s=1.0).to_json() + "\n"
for _ in range(45_000):           # about 5.8 MB of events, past the read-ahead limit
    sys.stdout.write(line)
sys.stdout.flush()
sys.stderr.write("x" * 100 + "\n" * 1)
sys.stderr.write(("y" * 99 + "\n") * 5000)   # 500 KB of stderr
"""


PIPE_FULL = 60_000    # of the 64 KiB a Linux pipe holds (a write that does not fit whole waits)


def _unread(w: WorkerClient) -> int:
    """Bytes in the worker's stdout pipe that nobody has read yet."""
    import fcntl
    import struct
    import termios

    return struct.unpack("i", fcntl.ioctl(w.proc.stdout.fileno(), termios.FIONREAD, b"\0" * 4))[0]


def test_a_reader_that_falls_behind_slows_the_worker_and_memory_stays_bounded(tmp_path):
    from trainer.protocol.client import MAX_PENDING_BYTES, STDERR_TAIL_BYTES

    w = WorkerClient([], command=[sys.executable, "-c", FLOOD], cwd=Path(__file__).resolve().parents[3])
    try:
        deadline = time.monotonic() + 30
        # the reader reads up to its limit, then stops: the pipe behind it fills up
        while (w.pending_bytes < MAX_PENDING_BYTES or _unread(w) < PIPE_FULL) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _unread(w) >= PIPE_FULL
        assert MAX_PENDING_BYTES <= w.pending_bytes < MAX_PENDING_BYTES + (1 << 16)   # it read no further
        assert w.is_running()                               # the worker waits on its full pipe
        count = sum(1 for e in w.events(timeout=60) if isinstance(e, ev.Metrics))
        assert count == 45_000 and w.wait(30) == 0 and w.bad_lines == 0
    finally:
        w.kill()
    assert len(w.stderr) <= STDERR_TAIL_BYTES and w.stderr.endswith("y" * 99 + "\n")   # the tail, bounded


def test_a_detached_worker_runs_on_in_its_own_session(tmp_path):
    marker = tmp_path / "still-here"
    # The child writes its line in one write() and treats a closed stream as the worker's Emitter does
    # (print() writes text and newline in two syscalls: the reader may close between them).
    script = (f"import os, sys, time, pathlib\nsys.stdin.read()\ntime.sleep(0.3)\n"
              f"try:\n    os.write(1, b'{{\"event\": \"state\"}}\\n')\nexcept BrokenPipeError:\n    pass\n"
              f"pathlib.Path({str(marker)!r}).write_text('yes')\n")
    w = WorkerClient([], command=[sys.executable, "-c", script], own_session=True)
    assert os.getsid(w.pid) == w.pid                       # a session of its own: outlives its parent
    w.detach()                                              # closes its stdin: it reads EOF and goes on
    assert not w.pause()                                    # nothing is sent once detached
    assert w.wait(30) == 0 and marker.read_text() == "yes"  # its write to the closed pipe did not kill it
    assert w.poll() == []
