"""The worker under faults (issue 18): anything unexpected before ``run_started`` is a refusal (exit 2,
``failed`` with ``problems``, no traceback on the terminal); a closed stdin never leaves a run paused;
repeated stop signals end it cleanly; a truncated checkpoint is named, not loaded."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from trainer.store.runs import RunStore

from .helpers import write_spec

pytestmark = pytest.mark.process


def start(args: list[str], **popen) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "trainer", *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def events_of(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def test_unexpected_errors_before_the_run_starts_are_refusals_not_tracebacks(tmp_path):
    cases = {"seed 2**64": dict(train={"seed": 2**64}), "cuda:abc": dict(device="cuda:abc"),
             "cuda:-1": dict(device="cuda:-1")}
    procs = {}
    for name, sections in cases.items():
        folder = tmp_path / name.replace("*", "")
        folder.mkdir()
        procs[name] = start(["run", str(write_spec(folder, **sections)), "--db",
                             f"sqlite:///{folder / 'runs.sqlite'}"])
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=300)
        events = events_of(out)
        assert proc.returncode == 2, (name, err)
        assert [e["event"] for e in events] == ["failed"] and events[0]["run_id"] is None, name
        assert events[0]["problems"] and events[0]["message"], name
        assert "Traceback" not in err and err.startswith("error: "), (name, err)


def test_any_exception_before_run_started_keeps_its_traceback_in_the_event_only(tmp_path, monkeypatch, capsys):
    from trainer import worker

    def broken(_spec):
        raise ZeroDivisionError("a bug in the data loader")

    monkeypatch.setattr(worker, "setup", broken)
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        code = worker.main(["run", str(write_spec(tmp_path)), "--db", f"sqlite:///{tmp_path / 'runs.sqlite'}"])
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)
    out, err = capsys.readouterr()
    failed = json.loads(out)
    assert code == 2 and failed["event"] == "failed" and failed["kind"] == "error" and failed["run_id"] is None
    assert failed["problems"] == [failed["message"]] and "ZeroDivisionError: a bug in the data loader" in \
        failed["message"]
    assert "Traceback" in failed["traceback"] and "Traceback" not in err
    assert err == f"error: {failed['message']}\n"


def test_a_paused_run_whose_stdin_closes_resumes_and_ends(tmp_path):
    db = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    proc = start(["run", str(write_spec(tmp_path, train={"epochs": 2})), "--db", db])
    for line in proc.stdout:
        if json.loads(line)["event"] == "metrics":
            break
    proc.stdin.write('{"command": "pause"}\n')
    proc.stdin.flush()
    for line in proc.stdout:
        if json.loads(line)["event"] == "state":
            assert json.loads(line)["state"] == "paused"
            break
    proc.stdin.close()                   # the studio went away ("let it finish")
    rest = events_of(proc.stdout.read())
    err = proc.stderr.read()
    assert proc.wait(120) == 0, err
    assert rest[0]["event"] == "state" and rest[0]["state"] == "running" and "stdin closed" in rest[0]["reason"]
    assert rest[-1]["event"] == "finished" and rest[-1]["status"] == "completed"
    assert RunStore(db, create=False).run(rest[-1]["run_id"]).status == "completed"


@pytest.mark.parametrize("signals", [(signal.SIGTERM, signal.SIGTERM), (signal.SIGINT, signal.SIGINT)])
def test_a_second_stop_signal_after_stopping_still_exits_0(tmp_path, signals):
    db = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    proc = start(["run", str(write_spec(tmp_path, train={"epochs": 200})), "--db", db])
    for line in proc.stdout:
        if json.loads(line)["event"] == "metrics":
            break
    proc.send_signal(signals[0])
    for line in proc.stdout:                       # stopping: checkpoint, test, finished...
        if json.loads(line)["event"] == "finished":
            break
    for _ in range(5):                             # ...and more presses while it shuts down
        if proc.poll() is None:
            proc.send_signal(signals[1])
            time.sleep(0.02)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "Traceback" not in err


def test_a_stop_signal_while_the_worker_starts_is_a_clean_stop(tmp_path):
    db = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    proc = start(["run", str(write_spec(tmp_path, train={"epochs": 200})), "--db", db])
    status = f"/proc/{proc.pid}/status"
    if not os.path.exists(status):
        pytest.skip("needs /proc to see when the worker's first line has run")
    def catches_sigterm() -> bool:
        with open(status) as f:
            return bool(int(next(x for x in f if x.startswith("SigCgt")).split()[1], 16) & (1 << 14))

    deadline = time.monotonic() + 120
    while not catches_sigterm() and time.monotonic() < deadline:     # until its first lines ran: torch is loading now
        time.sleep(0.01)
    assert catches_sigterm(), "the worker never installed its SIGTERM handler"
    proc.send_signal(signal.SIGINT)
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    events = events_of(out)
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert events[-1]["event"] == "finished" and events[-1]["status"] == "stopped"


def test_exporting_a_run_whose_checkpoint_is_truncated_says_so(tmp_path):
    from exporters import ExportError, from_run

    db = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    proc = start(["run", str(write_spec(tmp_path)), "--db", db])
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    run_id = events_of(out)[-1]["run_id"]
    # a verified export whose store went away before the artifact could be recorded: said, not a traceback
    from exporters import export

    source = from_run(run_id, store=db)
    (tmp_path / "runs.sqlite").rename(tmp_path / "moved.sqlite")
    report = export(source, "onnx", tmp_path / "model.onnx")
    assert report.ok and (tmp_path / "model.onnx").is_file()
    assert any(n.startswith(f"not recorded with run {run_id}: ") and "no run store at" in n for n in report.notes)
    (tmp_path / "moved.sqlite").rename(tmp_path / "runs.sqlite")
    best = RunStore(db, create=False).checkpoint_path(run_id, "best")
    best.write_bytes(best.read_bytes()[: best.stat().st_size // 2])
    with pytest.raises(ExportError, match=rf"run {run_id}: its best checkpoint .* cannot be used: .*"
                                          "not a complete checkpoint, truncated or corrupt"):
        from_run(run_id, store=db)
    with pytest.raises(ExportError, match="no run store at"):
        from_run(run_id, store=f"sqlite:///{tmp_path / 'typo.sqlite'}")
    assert not (tmp_path / "typo.sqlite").exists()
    # the real command: one error line, no SafetensorError traceback
    done = subprocess.run([sys.executable, "-m", "studio", "export", str(run_id), "--format", "onnx", "-o",
                           str(tmp_path / "out"), "--db", db], capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and "Traceback" not in done.stderr and "not a complete checkpoint" in done.stderr
