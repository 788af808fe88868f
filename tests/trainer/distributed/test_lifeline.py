"""A rank dies with the process that started it, and no resume starts while a rank of the run lives
(issue 22: kill -9 of the launcher left both ranks training, and a resume was accepted).

Real processes without torch: a parent that starts a child calling :func:`die_with_parent`, killed
with SIGKILL; a real SQLite store whose run names a live process as its rank.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trainer.distributed.lifeline import live_ranks, note_alive, pid_file
from trainer.protocol import events as ev
from trainer.run_outcome import open_for_resume
from trainer.store.liveness import process_alive
from trainer.store.runs import RunStore

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[3]
CHILD = ("from trainer.distributed.lifeline import die_with_parent; die_with_parent(); print('armed', flush=True); "
         "import time; time.sleep(60)")
PARENT = f"""
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", {CHILD!r}])
print(child.pid, flush=True)
time.sleep(60)
"""


def _wait_gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while process_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not process_alive(pid)


def test_a_child_dies_when_its_parent_is_killed_with_sigkill():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True, env=env)
    lines = {parent.stdout.readline().strip() for _ in range(2)}   # the child's pid, and the child's word
    child = int(next(line for line in lines if line.isdigit()))     # (each ends within the 60 s they sleep)
    try:
        assert "armed" in lines                   # the child has asked for its signal
        assert process_alive(child)
        parent.kill()
        parent.wait(10)
        assert _wait_gone(child, 5), "the child outlived its parent"
    finally:
        parent.kill()
        if process_alive(child):
            os.kill(child, signal.SIGKILL)


def test_no_resume_while_a_rank_of_the_run_lives(tmp_path):
    db = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    store = RunStore(db)
    run_dir = tmp_path / "run-1"
    run_id = store.create_run(name="r", spec={}, graph={}, graph_hash="h", device="cpu", params=1,
                              run_dir=str(run_dir))
    store.update_run(run_id, status="interrupted", pid=0)     # its launcher is gone
    rank = subprocess.Popen([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(ROOT)!r}); "
                             f"from trainer.distributed.lifeline import note_alive; from pathlib import Path; "
                             f"note_alive(Path({str(run_dir)!r}), 1); print(flush=True); "
                             "import time; time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        rank.stdout.readline()
        assert live_ranks(run_dir) == [(1, rank.pid)]
        out = io.StringIO()
        assert open_for_resume(run_id, db=db, emitter=ev.Emitter(out)) == ev.EXIT_REFUSED
        assert f"run {run_id} is still running: its rank 1 (pid {rank.pid}) lives" in out.getvalue()
    finally:
        rank.kill()
        rank.wait(10)
    assert live_ranks(run_dir) == []
    opened = open_for_resume(run_id, db=db, emitter=ev.Emitter(io.StringIO()))
    assert not isinstance(opened, int) and opened[1].id == run_id


def test_a_pid_record_of_a_dead_or_foreign_process_is_not_a_live_rank(tmp_path):
    note_alive(tmp_path, 0)
    assert live_ranks(tmp_path) == [(0, os.getpid())]
    record = pid_file(tmp_path, 0)
    record.write_text(record.read_text().replace('"host": "', '"host": "elsewhere-'))
    assert live_ranks(tmp_path) == []
    pid_file(tmp_path, 2).write_text("{not json")
    assert live_ranks(tmp_path) == [] and live_ranks(None) == [] and live_ranks(tmp_path / "none") == []
