"""The epoch loop's metrics windows: reported per interval of training, exact epoch totals, a NaN
named to its step. A scripted clock, a step function that returns chosen losses and predictions."""

from __future__ import annotations

import pytest
import torch

from trainer.callbacks import Callback, MetricsWindow
from trainer.loop import EpochTotals, Loop, NonFiniteLoss, Window, report_pending, train_one_epoch


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _batches(n: int, batch: int = 4):
    for i in range(n):
        yield torch.zeros(batch, 2), torch.full((batch,), i % 3), batch


def _step(clock: Clock, losses: dict[int, float] | None = None):
    """Each call takes 1/32 s on the clock (8 steps an interval, exactly); predictions right for the
    first two rows of four."""
    calls = {"n": 0}

    def step(_x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        clock.t += 1 / 32
        calls["n"] += 1
        pred = y.clone()
        pred[2:] += 1
        return torch.tensor((losses or {}).get(calls["n"], 1.0)), pred

    return step


class Reports(Callback):
    """Keeps each metrics window as (step, epoch, losses, correct, lr, samples_per_s)."""

    def __init__(self, reports: list) -> None:
        self.reports = reports

    def on_metrics(self, window: MetricsWindow) -> None:
        self.reports.append((window.step, window.epoch, window.losses, window.correct, window.lr,
                             window.samples_per_s))


def _loop(clock: Clock, reports: list) -> Loop:
    return Loop(lr_at=lambda s: 0.1, callbacks=[Reports(reports)], interval_s=0.25, clock=clock)


def test_short_epochs_are_reported_per_interval_with_exact_totals():
    clock, reports, window = Clock(), [], Window()
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    step_fn, step = _step(clock), 0
    for epoch in range(1, 11):                 # ten epochs of 3 steps (3/32 s each)
        totals = EpochTotals()
        step, stopped = train_one_epoch(step_fn, opt, _batches(3), epoch=epoch, step=step, batch_size=4,
                                        window=window, totals=totals, loop=_loop(clock, reports))
        assert not stopped and totals.steps == 3 and totals.accuracy == 0.5 and totals.loss == 1.0
    # the first step on its own, then one report per 0.25 s of training (8 steps), not one per epoch
    assert [(r[0], r[1]) for r in reports] == [(1, 1), (9, 3), (17, 6), (25, 9)]
    _step_, _epoch, losses, correct, lr, rate = reports[1]
    assert len(losses) == 8 and correct == [2.0] * 8 and lr == 0.1 and rate == 8 * 4 / 0.25
    report_pending(window, _loop(clock, reports), step, 10, 0.1, 4)    # the run ends: the rest
    assert [r[0] for r in reports] == [1, 9, 17, 25, 30] and len(reports[-1][2]) == 5
    report_pending(window, _loop(clock, reports), step, 10, 0.1, 4)    # nothing left: no report
    assert len(reports) == 5


def test_a_run_s_curves_start_at_its_first_step():
    """A quick epoch (19 steps in less than the interval) was first reported at its end, as the mean of
    every step: the dashboard's curves started at step 11 of 19. The first step is reported on its own;
    a resumed run (its curves drawn) waits for its interval."""
    clock, reports, window = Clock(), [], Window()
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    loop = _loop(clock, reports)
    loop.interval_s = 10.0
    step, _ = train_one_epoch(_step(clock, {1: 2.5}), opt, _batches(19), epoch=1, step=0, batch_size=4,
                              window=window, totals=EpochTotals(), loop=loop)
    assert [(r[0], r[2]) for r in reports] == [(1, [2.5])]   # its own loss, not a mean with later steps
    report_pending(window, loop, step, 1, 0.1, 4)
    assert [r[0] for r in reports] == [1, 19] and len(reports[-1][2]) == 18
    resumed: list = []
    train_one_epoch(_step(clock), opt, _batches(5), epoch=2, step=19, batch_size=4, window=Window(),
                    totals=EpochTotals(), loop=_loop(clock, resumed))
    assert resumed == []


def test_a_non_finite_loss_names_its_step():
    clock, window = Clock(), Window()
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    with pytest.raises(NonFiniteLoss, match="the loss became nan at step 105"):
        train_one_epoch(_step(clock, {6: float("nan")}), opt, _batches(10), epoch=1, step=99, batch_size=4,
                        window=window, totals=EpochTotals(), loop=_loop(clock, []))


def test_time_spent_paused_is_counted_apart_from_training():
    """Epoch times and the ETA leave pauses out: Controls adds up how long poll() blocked in a pause."""
    import threading
    import time

    from trainer.protocol.controls import Controls
    from trainer.protocol.events import Pause, Resume

    states: list[str] = []
    marks: dict[str, float] = {}

    def resume() -> None:
        marks["resumed"] = time.perf_counter()
        controls.commands.put(Resume())

    def on_state(state: str, _reason: str) -> None:
        states.append(state)
        if state == "paused":   # the pause has begun: resume it from another thread 0.4 s on
            marks["paused"] = time.perf_counter()
            threading.Timer(0.4, resume).start()

    controls = Controls(on_state)
    controls.commands.put(Pause())
    t0 = time.perf_counter()
    assert controls.poll() is False
    blocked = time.perf_counter() - t0
    assert states == ["paused", "running"]
    # The clock's own readings bound it, not the timer's nominal 0.4 s (a timer may fire a hair early).
    assert marks["resumed"] - marks["paused"] <= controls.paused_seconds <= blocked
    assert controls.poll() is False and controls.paused_seconds <= blocked   # not paused: nothing added


class StopAt(Callback):
    """The commands' part: stops the run after step ``at``; counts its calls."""

    def __init__(self, at: int) -> None:
        self.at, self.calls = at, 0

    def on_step_end(self, step: int) -> bool:
        self.calls += 1
        return step >= self.at


def test_a_callback_that_acts_after_each_step_can_stop_the_epoch_and_the_rest_are_not_called_per_step():
    from trainer.callbacks import stepping

    clock, reports, window = Clock(), [], Window()
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    stop, report = StopAt(5), Reports(reports)
    assert stepping([report, stop]) == [stop]          # Reports has no on_step_end: no per-step call
    loop = Loop(lr_at=lambda s: 0.1, callbacks=[stop, report], interval_s=10.0, clock=clock)
    step, stopped = train_one_epoch(_step(clock), opt, _batches(20), epoch=1, step=0, batch_size=4,
                                    window=window, totals=EpochTotals(), loop=loop)
    assert (step, stopped, stop.calls) == (5, True, 5)
    assert [(r[0], len(r[2])) for r in reports] == [(1, 1), (5, 4)]   # the first step, then stopping reports at once


@pytest.mark.parametrize("fold", [1 << 20, 25])   # all at the end; every few batches (rows x classes >= 25)
def test_evaluate_gives_the_loss_accuracy_and_confusion_of_the_real_rows(monkeypatch, fold):
    import trainer.loop as loop
    from trainer.data import Split
    from trainer.data.loaders import DeviceLoader

    monkeypatch.setattr(loop, "EVAL_FOLD", fold)
    gen = torch.Generator().manual_seed(3)
    x, y = torch.randn(23, 4, generator=gen), torch.randint(0, 3, (23,), generator=gen)
    model = torch.nn.Linear(4, 3)
    loader = DeviceLoader(Split(x, y), 5, torch.device("cpu"), train=False)   # 5 batches, the last padded
    got = loop.evaluate(model, loader, 3, device=torch.device("cpu"), precision="fp32")
    with torch.no_grad():
        logits = model(x)
    expected = torch.zeros(3, 3, dtype=torch.long)
    for t, p in zip(y.tolist(), logits.argmax(1).tolist(), strict=True):
        expected[t, p] += 1
    assert got.loss == pytest.approx(torch.nn.functional.cross_entropy(logits, y).item(), rel=1e-6)
    assert (got.confusion == expected.numpy()).all() and got.accuracy == int((logits.argmax(1) == y).sum()) / 23
