"""The loader's processes start at the run's start, not at its first batch: the forkserver the workers
fork from is running while the model is built, and the train loader's workers are up before the first
epoch asks for a batch (the first epoch of a 640-JPEG run spent 15% of its time waiting on them).

The real worker runs in a fresh process (no forkserver left over from another test), its ``build_model``
and ``run_epochs`` wrapped to look at its process tree through /proc at those two moments."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ...helpers import ROOT, tiny_cnn, write_spec
from ...image_files import write_folder

pytestmark = [pytest.mark.process,
              pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process tree from /proc")]

WATCH = r'''
import json, os, sys, time
from pathlib import Path

import trainer.worker as worker


def children(pid):
    """(pid, command line) of each child of ``pid``."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(") ", 1)[1].split()
            if int(fields[1]) == pid:
                out.append((int(stat.parent.name), (stat.parent / "cmdline").read_bytes()))
        except (OSError, IndexError, ValueError):
            pass
    return out


def forkserver():
    return [pid for pid, cmd in children(os.getpid()) if b"multiprocessing.forkserver" in cmd]


def loader_workers():
    return [pid for server in forkserver() for pid, _ in children(server)]


seen = {}
build, epochs = worker.build_model, worker.run_epochs


def build_model(st):
    seen["forkserver_at_build"] = len(forkserver())
    return build(st)


def run_epochs(job):
    deadline = time.monotonic() + 120     # the workers' start waits on the forkserver's imports: slow under load
    while len(loader_workers()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    seen["workers_before_first_batch"] = len(loader_workers())
    return epochs(job)


worker.build_model, worker.run_epochs = build_model, run_epochs
code = worker.main(["run", sys.argv[1], "--db", sys.argv[2]])
print("SEEN " + json.dumps(seen), file=sys.stderr)
sys.exit(code)
'''


def test_the_loaders_processes_start_with_the_run_not_at_its_first_batch(tmp_path: Path, db: str) -> None:
    write_folder(tmp_path / "images", classes=3, per_class=8)
    spec = write_spec(tmp_path, tiny_cnn(channels=3, size=12, classes=3),
                      data={"dataset": str(tmp_path / "images"), "workers": 2, "val_fraction": 0.0,
                            "test_fraction": 0.0},
                      train={"epochs": 1, "batch_size": 8}, checkpoints={"best": False, "last": False})
    done = subprocess.run([sys.executable, "-c", WATCH, str(spec), db], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stderr.rsplit("SEEN ", 1)[1])
    assert seen["forkserver_at_build"] == 1, seen      # started when the run knew it streams, before the build
    assert seen["workers_before_first_batch"] == 2, seen    # up without a batch asked for
    assert '"event": "finished"' in done.stdout


EARLY = r'''
import os, signal, sys, time
from pathlib import Path
from trainer.data.forkserver import start_early
started = start_early(sys.argv[1:])

def children():
    found = []
    for p in Path("/proc").glob("[0-9]*"):
        try:
            if (p / "stat").read_text().rsplit(") ", 1)[1].split()[1] == str(os.getpid()) \
                    and b"multiprocessing.forkserver" in (p / "cmdline").read_bytes():
                found.append(p)
        except OSError:
            pass
    return found

# the server is forked, then execs: until it has, its command line is still this process's (seen once in CI)
deadline = time.monotonic() + (10 if started else 0)
servers = children()
while not servers and time.monotonic() < deadline:
    time.sleep(0.02)
    servers = children()
print(started, len(servers), "torch" in sys.modules, flush=True)
for server in servers:    # its imports are not what is tested: not waited for (it holds this process's stdout)
    os.kill(int(server.name), signal.SIGKILL)
'''


@pytest.mark.parametrize("dataset, expected", [("images", "True 1 False"), ("images.csv", "True 1 False"),
                                               ("digits", "False 0 False"), ("empty", "False 0 False")])
def test_the_worker_command_starts_the_loaders_helper_before_it_imports_torch(tmp_path: Path, dataset: str,
                                                                               expected: str) -> None:
    """``python -m trainer run SPEC`` of an image folder or CSV starts the forkserver before importing torch
    (from the spec file alone), so the two imports run side by side; other datasets start none."""
    write_folder(tmp_path / "images", classes=2, per_class=2)
    (tmp_path / "images.csv").write_text("path,label\nimages/c0/00000.jpg,a\n")
    (tmp_path / "empty").mkdir()
    spec = write_spec(tmp_path, tiny_cnn(channels=3, size=12, classes=2), data={"dataset": dataset, "workers": 2})
    done = subprocess.run([sys.executable, "-c", EARLY, "run", str(spec)], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.split("\n")[0] == expected, done.stderr
