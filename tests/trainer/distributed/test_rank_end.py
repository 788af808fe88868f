"""How a rank ends: with its process groups destroyed and their gloo threads gone while Python is whole.

Issue 22: with channels_last off, 1 of 9 DDP runs lost rank 1 to SIGABRT ("terminate called without an
active exception"). A rank's wrapped model and its two groups outlived ``destroy_process_group`` (the
recorder thread's frame held its last write, a closure over the job), so the groups' gloo threads ran on
into the interpreter's teardown, where a gloo thread freeing a tensor asks a finalizing interpreter for
the GIL and the process is terminated. Here a whole rank runs in this process (a one-rank gloo group,
as torchrun would start it) and must leave no gloo thread and no recorder thread behind.
"""

from __future__ import annotations

import io
import os
import signal
import socket
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

from tests.trainer.helpers import write_spec
from trainer.distributed.lifeline import GLOO_THREADS, gloo_threads_alive
from trainer.distributed.rank import run_rank
from trainer.protocol import events as ev
from trainer.store.runs import RunStore

pytestmark = pytest.mark.process   # a whole rank's run in this process: seconds, with the worker runs



def os_threads() -> Counter[str]:
    """This process's threads by their kernel name (gloo's C++ threads have no Python counterpart)."""
    names: Counter[str] = Counter()
    for task in os.listdir("/proc/self/task"):
        try:
            names[Path(f"/proc/self/task/{task}/comm").read_text().strip()] += 1
        except OSError:      # ended while listed
            continue
    return names


def recorder_threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name == "trainer-recorder" and t.is_alive())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="threads are read from /proc")
def test_a_ddp_rank_ends_with_its_groups_threads_joined(tmp_path, monkeypatch):
    for key, value in {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
                       "MASTER_PORT": str(free_port())}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))          # rank 0 reads commands: none come
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}   # the rank installs its own
    spec = write_spec(tmp_path, precision={"channels_last": False},
                      distributed={"strategy": "ddp", "nproc_per_node": 1})
    before, recorders = os_threads(), recorder_threads()
    out = io.StringIO()
    try:
        code = run_rank(str(spec), db=f"sqlite:///{tmp_path / 'runs.sqlite'}", run_dir=str(tmp_path / "run"),
                        run_id=None, resume_from=None, emitter=ev.Emitter(out))
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)
    assert code == ev.EXIT_OK, out.getvalue()[-2000:]
    assert RunStore(f"sqlite:///{tmp_path / 'runs.sqlite'}").run(1).status == "completed"
    left = os_threads()
    assert {n: left[n] - before[n] for n in GLOO_THREADS if left[n] > before[n]} == {}
    assert recorder_threads() == recorders
    if not sum(before[n] for n in GLOO_THREADS):    # and the rank's exit sees none (it ends with the teardown)
        assert not gloo_threads_alive()
