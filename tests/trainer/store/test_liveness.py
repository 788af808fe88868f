"""Which runs' processes are alive (trainer.store.liveness), and the run store's query methods the studio reads."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from trainer.store.liveness import process_alive, process_started
from trainer.store.runs import RunStore

pytestmark = pytest.mark.process


def test_a_process_is_known_by_its_pid_and_start_time():
    me = os.getpid()
    started = process_started(me)
    assert process_alive(me) and process_alive(me, started)
    if started:                                   # Linux: a reused pid is told apart by its start time
        assert not process_alive(me, started + 1)
    assert not process_alive(0) and not process_alive(-5)


def test_an_exited_child_is_not_alive():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    started = process_started(child.pid)
    child.wait()                                  # reaped: its pid names no process now
    assert not process_alive(child.pid, started)


def test_metric_max_is_the_highest_value_of_one_metric_of_one_run(tmp_path):
    store = RunStore(f"sqlite:///{tmp_path / 'runs.sqlite'}")
    ids = [store.create_run(name=n, spec={}, graph={}, graph_hash="h", device="cpu", params=1) for n in "ab"]
    store.add_metrics(ids[0], [(1, "val/accuracy", 0.5), (2, "val/accuracy", 0.75), (3, "val/accuracy", 0.625),
                               (3, "train/accuracy", 0.9)])
    store.add_metrics(ids[1], [(1, "val/accuracy", 0.95)])
    assert store.metric_max(ids[0], "val/accuracy") == 0.75
    assert store.metric_max(ids[1], "val/accuracy") == 0.95
    assert store.metric_max(ids[0], "val/loss") is None
