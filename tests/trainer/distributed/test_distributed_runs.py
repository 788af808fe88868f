"""Proof of issue 17 with real torchrun ranks on the CPU (gloo): DDP on 2 processes trains as 1 process
does at the same global batch and seed, FSDP2 on 2 as DDP on 2, a 2-process FSDP2 checkpoint resumes
in 1 process with the same losses, a rank killed with SIGKILL ends the run failed naming it.

Each run starts 3 Python processes (the launcher and 2 ranks): tens of seconds on 2 busy cores, so
these are ``slow``; the runs are shared by the tests through module fixtures.
"""

from __future__ import annotations

import math
import os
import signal
import time
from pathlib import Path

import pytest
import torch

from trainer.checkpoints.single_file import load_checkpoint_weights
from trainer.protocol.client import WorkerClient, environ_with
from trainer.store.runs import RunStore

from ..helpers import DIGITS_CNN, kinds, run_worker, tiny_cnn, write_spec

pytestmark = [pytest.mark.slow, pytest.mark.process]

EPOCHS = 3
TRAIN = {"epochs": EPOCHS, "batch_size": 64, "metrics_interval_s": 0.1, "seed": 3}


def _run(folder: Path, **distributed) -> tuple[str, list]:
    folder.mkdir(parents=True, exist_ok=True)
    db = f"sqlite:///{folder / 'runs.sqlite'}"
    spec = write_spec(folder, tiny_cnn(), train=TRAIN, distributed=distributed or {"strategy": "none"})
    code, events, stderr = run_worker(spec, db, timeout=300)
    assert code == 0, stderr[-3000:]
    return db, events


def _curve(db: str) -> dict[str, list[float]]:
    """Per epoch: training loss and accuracy, validation loss and accuracy (the curves a run keeps)."""
    store = RunStore(db)
    out = {name: [v for _, _, v in store.metrics(1, name)] for name in
           ("epoch/train_loss", "epoch/train_accuracy", "val/loss", "val/accuracy")}
    assert all(len(v) == EPOCHS for v in out.values()), out
    return out


def _weights(db: str) -> dict[str, torch.Tensor]:
    path = RunStore(db).checkpoint_path(1, "last")
    return load_checkpoint_weights(path)


def _agree(a: str, b: str) -> None:
    for name, values in _curve(a).items():
        assert values == pytest.approx(_curve(b)[name], rel=1e-4, abs=1e-5), name
    wa, wb = _weights(a), _weights(b)
    assert wa.keys() == wb.keys()
    for k in wa:
        torch.testing.assert_close(wa[k], wb[k], rtol=1e-4, atol=1e-5, msg=k)


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("dist")


@pytest.fixture(scope="module")
def one(root) -> tuple[str, list]:
    return _run(root / "one")


@pytest.fixture(scope="module")
def ddp(root) -> tuple[str, list]:
    return _run(root / "ddp", strategy="ddp", nproc_per_node=2)


@pytest.fixture(scope="module")
def fsdp2(root) -> tuple[str, list]:
    return _run(root / "fsdp2", strategy="fsdp2", nproc_per_node=2)


def test_ddp_on_two_processes_trains_as_one_process(one, ddp):
    db, events = ddp
    started = next(e for e in events if e.event == "run_started")
    assert started.distributed == {"strategy": "ddp", "world_size": 2, "backend": "gloo"}
    assert kinds(events)[-1] == "finished"
    assert len({e.run_id for e in events}) == 1
    assert [r.status for r in RunStore(db).runs()] == ["completed"]     # one run, not one per rank
    _agree(one[0], db)
    assert Path(RunStore(db).checkpoint_path(1, "last")).name.endswith(".dcp")
    # Each rank evaluated half of every val/test batch; the sums over the ranks are one process's.
    ends = [[e for e in evs if e.event == "epoch_end"] for evs in (one[1], events)]
    assert [e.confusion for e in ends[0]] == [e.confusion for e in ends[1]]
    assert sum(map(sum, ends[1][-1].confusion)) == started.val_size          # every val row counted once
    done = [evs[-1] for evs in (one[1], events)]
    assert done[1].test_accuracy == done[0].test_accuracy
    assert done[1].test_loss == pytest.approx(done[0].test_loss, rel=1e-5)


def test_fsdp2_on_two_processes_trains_as_ddp(ddp, fsdp2):
    """pytorch#162338 (gloo's reduce-scatter summing) would double every gradient: the runs would part."""
    _agree(ddp[0], fsdp2[0])


@pytest.mark.parametrize("how", [["--distributed", "none"], ["--nproc-per-node", "2"]], ids=["one-process", "fsdp2-2"])
def test_a_two_process_fsdp2_checkpoint_resumes_elsewhere(fsdp2, tmp_path, how):
    """In 1 process (gathered whole) and under FSDP2 on 2 again (each rank reads its own shards)."""
    db = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    spec = write_spec(tmp_path, tiny_cnn(), train=TRAIN, distributed={"strategy": "fsdp2", "nproc_per_node": 2})
    with WorkerClient.run(spec, db=db) as w:
        for e in w.events(timeout=300):
            if e.event == "epoch_end":
                w.stop()          # in epoch 2: the last checkpoint is sharded, mid-epoch
        assert w.wait(60) == 0, w.stderr[-3000:]
    store = RunStore(db)
    assert store.run(1).status == "stopped"
    stopped_at = store.checkpoint_candidates(1, "last")[0]
    assert stopped_at.path.endswith(".dcp") and 0 < stopped_at.epoch < EPOCHS
    with WorkerClient(["resume", "1", "--db", db, *how]) as w:
        events = list(w.events(timeout=300))
        assert w.wait(60) == 0, w.stderr[-3000:]
    assert events[0].distributed == (None if how[-1] == "none" else {"strategy": "fsdp2", "world_size": 2,
                                                                      "backend": "gloo"})
    assert store.run(1).status == "completed"
    ref = _curve(fsdp2[0])
    got = _curve(db)
    for name in ("val/loss", "epoch/train_loss"):
        assert got[name] == pytest.approx(ref[name], rel=1e-4, abs=1e-5), name


def _rank_pids(launcher: int) -> dict[int, int]:
    """The ranks torchrun started under the launcher: {rank: pid}, read from /proc."""
    out = {}
    for child in Path(f"/proc/{launcher}/task").glob("*/children"):
        for pid in child.read_text().split():
            try:
                env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            rank = [e for e in env if e.startswith(b"RANK=")]
            if rank:
                out[int(rank[0].split(b"=")[1])] = int(pid)
    return out


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except OSError:
        return True


def test_kill_9_of_a_rank_fails_the_run_naming_it(tmp_path):
    db = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    spec = write_spec(tmp_path, tiny_cnn(), train={**TRAIN, "epochs": 50},
                      distributed={"strategy": "ddp", "nproc_per_node": 2})
    with WorkerClient.run(spec, db=db) as w:
        events, pids = [], {}
        for e in w.events(timeout=300):
            events.append(e)
            if e.event == "metrics" and not pids:
                pids = _rank_pids(w.pid)
                assert sorted(pids) == [0, 1]
                os.kill(pids[1], signal.SIGKILL)
        code = w.wait(60)
    assert code == 1
    failed = events[-1]
    assert failed.event == "failed" and failed.rank == 1, failed
    assert "rank 1" in failed.message and "SIGKILL" in failed.message
    run = RunStore(db).run(1)
    assert run.status == "failed" and "rank 1" in run.error and run.error_kind == "error"
    deadline = time.monotonic() + 30
    while not all(_gone(p) for p in pids.values()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert all(_gone(p) for p in pids.values())                  # nothing left running
    assert RunStore(db).metrics(1, "train/loss")                   # what was measured before stays


def test_bf16_autocast_with_ddp_and_fsdp2(tmp_path):
    """bf16 autocast (and channels_last: a convnet on images) under both strategies: the runs finish,
    learn, and DDP and FSDP2 (fp32 parameters, the same autocast) still agree."""
    dbs = {}
    for strategy in ("ddp", "fsdp2"):
        folder = tmp_path / strategy
        folder.mkdir()
        dbs[strategy] = db = f"sqlite:///{folder / 'runs.sqlite'}"
        spec = write_spec(folder, tiny_cnn(), train={**TRAIN, "epochs": 2}, precision={"dtype": "bf16"},
                          distributed={"strategy": strategy, "nproc_per_node": 2})
        code, events, stderr = run_worker(spec, db, timeout=300)
        assert code == 0, stderr[-3000:]
        assert events[0].precision == "bf16" and events[-1].status == "completed"
        losses = [v for _, _, v in RunStore(db).metrics(1, "epoch/train_loss")]
        assert len(losses) == 2 and losses[1] < losses[0]
    a, b = (_weights(db) for db in dbs.values())
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=1e-3, atol=1e-4, msg=k)


def test_compile_bf16_and_channels_last_with_ddp_and_fsdp2(tmp_path):
    """torch.compile under torchrun (of the DDP module: DDPOptimizer splits its graph at the buckets;
    of the root after fully_shard), with bf16 autocast and channels_last, one short epoch each: the
    run compiles once on every rank, trains (finite losses) and finishes. Compiling costs about a
    minute a run on 2 busy cores; the two runs share one inductor cache."""
    env = environ_with(TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"), TORCHINDUCTOR_COMPILE_THREADS="1")
    for strategy in ("ddp", "fsdp2"):
        folder = tmp_path / strategy
        folder.mkdir()
        db = f"sqlite:///{folder / 'runs.sqlite'}"
        spec = write_spec(folder, tiny_cnn(), train={**TRAIN, "epochs": 1},
                          precision={"dtype": "bf16", "compile": "default", "channels_last": True},
                          distributed={"strategy": strategy, "nproc_per_node": 2})
        with WorkerClient.run(spec, db=db, env=env) as w:
            events = list(w.events(timeout=600))
            assert w.wait(60) == 0, w.stderr[-3000:]
        started, compiled = events[0], [e for e in events if e.event == "compile_done"]
        assert started.compile == "default" and started.precision == "bf16"
        assert started.distributed["strategy"] == strategy
        assert len(compiled) == 1 and compiled[0].seconds > 0 and compiled[0].mode == "default"
        assert isinstance(compiled[0].graph_breaks, int) and isinstance(compiled[0].recompiles, int)
        assert kinds(events).index("compile_done") < kinds(events).index("metrics")
        losses = [e.loss for e in events if e.event == "metrics"]
        assert losses and all(math.isfinite(v) for v in losses), strategy
        end = events[-1]
        assert end.event == "finished" and end.status == "completed" and math.isfinite(end.test_loss)
        assert RunStore(db).run(1).status == "completed"
    assert os.listdir(tmp_path / "inductor")


def test_kill_9_of_the_launcher_takes_its_ranks_and_the_run_resumes(tmp_path):
    """issue 22: kill -9 of the launcher left both ranks training (1,466 more metric rows in 20 s), and a
    resume was accepted and then failed because the orphans pruned its checkpoint. The ranks' command
    lines carry no store URL (a password in it would be in every `ps`). The shipped digits_cnn, so the
    resume reads a sharded checkpoint of channels_last weights and Adam moments back into DDP."""
    db = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    spec = write_spec(tmp_path, DIGITS_CNN, train={**TRAIN, "epochs": 4},
                      distributed={"strategy": "ddp", "nproc_per_node": 2})
    with WorkerClient.run(spec, db=db) as w:
        for e in w.events(timeout=300):
            if e.event == "checkpoint" and e.kind == "last":
                pids = _rank_pids(w.pid)
                assert sorted(pids) == [0, 1]
                assert all(b"--db" not in Path(f"/proc/{p}/cmdline").read_bytes() for p in pids.values())
                os.kill(w.pid, signal.SIGKILL)
                break
        w.wait(30)
    deadline = time.monotonic() + 10
    while not all(_gone(p) for p in pids.values()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert all(_gone(p) for p in pids.values()), "a rank outlived its launcher"   # so nothing writes on
    assert RunStore(db).metrics(1) and RunStore(db).run(1).status == "interrupted"
    with WorkerClient.resume(1, db=db) as w:
        events = list(w.events(timeout=300))
        assert w.wait(60) == 0, w.stderr[-3000:]
    assert events[-1].event == "finished" and RunStore(db).run(1).status == "completed"
