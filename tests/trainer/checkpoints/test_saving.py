"""When checkpoints are written: every ``checkpoints.every_s`` of the run, the epochs between held in memory
and written at the last epoch, a pause, a stop or the end; an older held best before a newer last."""

from __future__ import annotations

import pytest
import torch

from trainer.checkpoints.saving import Held, Taken
from trainer.checkpoints.single_file import verify_checkpoint
from trainer.protocol.client import WorkerClient
from trainer.store.runs import RunStore

from ..helpers import kinds, run_worker, write_spec
from ..test_worker import until


def taken(step: int, *kinds_: str) -> Taken:
    return Taken(kinds_, {"model.w": torch.full((2,), float(step))}, {"step": step, "epoch": step}, None)


def test_held_copies_come_out_oldest_first_each_with_the_kinds_it_is_still_held_as():
    held = Held()
    a, b, c = taken(10, "best", "last"), taken(20, "last"), taken(30, "best", "last")
    held.hold(a)
    held.hold(b)                                   # a newer last: a stays held as the best only
    assert held.take_all() == [(a, ("best",)), (b, ("last",))]
    assert held.take_all() == []                   # nothing stays held
    held.hold(a)
    held.hold(c)                                   # a newer best and last: a is not written at all
    assert held.take_all() == [(c, ("best", "last"))]


def test_a_write_is_due_every_s_after_the_last():
    held = Held(written_at=12.0)
    assert not held.due(16.9, 5.0) and held.due(17.0, 5.0)
    assert held.due(12.0, 0.0)                     # every_s 0: every epoch


def checkpoints_of(events):
    return [e for e in events if e.event == "checkpoint"]


@pytest.mark.process
def test_a_run_of_short_epochs_writes_its_best_and_last_once_at_its_end(tmp_path):
    db = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    code, events, err = run_worker(write_spec(tmp_path, train={"epochs": 6}, optim={"lr": 0.3}), db)
    assert code == 0, err
    ends = [e for e in events if e.event == "epoch_end"]
    best, last = saved = checkpoints_of(events)    # a best held from an older epoch comes first
    assert [c.kind for c in saved] == ["best", "last"]
    assert events.index(best) > events.index(ends[-1]) and last.step == ends[-1].step
    best_epoch = min(ends, key=lambda e: e.val_loss)   # the first of equal losses is the one kept
    assert (best.step, best.epoch, best.value) == (best_epoch.step, best_epoch.epoch, best_epoch.val_loss)
    _tensors, meta = verify_checkpoint(best.path, step=best.step)
    assert meta["kinds"] == (["best", "last"] if best.step == last.step else ["best"])
    assert str(RunStore(db).checkpoint_path(best.run_id, "best")) == best.path


@pytest.mark.process
def test_every_s_0_writes_every_epoch(tmp_path):
    spec = write_spec(tmp_path, train={"epochs": 3}, checkpoints={"every_s": 0})
    code, events, err = run_worker(spec, f"sqlite:///{tmp_path / 'runs.sqlite'}")
    assert code == 0, err
    lasts = [c for c in checkpoints_of(events) if c.kind == "last"]
    assert [c.epoch for c in lasts] == [1, 2, 3]
    kept = verify_checkpoint(lasts[-1].path, step=lasts[-1].step)[1]["spec"]   # the older ones are pruned
    assert kept["train"]["epochs"] == 3 and kept["checkpoints"]["every_s"] == 0


@pytest.mark.process
def test_a_pause_writes_what_is_held_and_a_stop_writes_the_held_best_before_its_last(tmp_path):
    spec = write_spec(tmp_path, train={"epochs": 300}, checkpoints={"every_s": 3600})   # held until the pause
    with WorkerClient.run(spec, db=f"sqlite:///{tmp_path / 'runs.sqlite'}") as w:
        stream = w.events(timeout=60)
        seen = until(stream, "epoch_end", 2)
        assert not checkpoints_of(seen)
        w.pause()
        seen += until(stream, "state")
        assert seen[-1].state == "paused", kinds(seen)
        ends, paused = [e for e in seen if e.event == "epoch_end"], checkpoints_of(seen)
        assert paused[-1].kind == "last" and paused[-1].step == ends[-1].step   # written before "paused"
        w.resume_training()
        seen += until(stream, "epoch_end")
        w.stop()
        rest = list(stream)
        assert w.wait(60) == 0, w.stderr
    stop_saves = checkpoints_of(rest)
    assert rest[-1].status == "stopped" and stop_saves[-1].kind == "last" and stop_saves[-1].step == rest[-1].step
    assert [c.step for c in stop_saves] == sorted(c.step for c in stop_saves)   # an older held best first


@pytest.mark.process
def test_the_write_checkpoints_command_writes_what_is_held_now(tmp_path):
    from trainer.protocol.commands import WriteCheckpoints

    spec = write_spec(tmp_path, train={"epochs": 300}, checkpoints={"every_s": 3600})   # held until asked
    with WorkerClient.run(spec, db=f"sqlite:///{tmp_path / 'runs.sqlite'}") as w:
        stream = w.events(timeout=60)
        seen = until(stream, "epoch_end", 2)
        assert not checkpoints_of(seen)
        w.send(WriteCheckpoints())
        seen += until(stream, "checkpoint")
        w.stop()
        rest = list(stream)
        assert w.wait(60) == 0, w.stderr
    ends = [e.step for e in seen if e.event == "epoch_end"]
    assert seen[-1].step in ends and seen[-1].step >= ends[1]     # an epoch's end, the second or a later one
    assert rest[-1].status == "stopped" and seen[-1].step < rest[-1].step   # written long before the run ended
