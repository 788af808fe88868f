"""Threads that follow the load: the decision from fake /proc text, the hysteresis, the step wrapper."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from trainer.threads import SWITCH, compiles, plan
from trainer.threads import adaptive as at

HZ = 100   # clock ticks a second, as /proc counts them


def proc_stat(cpus: list[tuple[int, int]]) -> str:
    """/proc/stat text with one line per CPU: (busy ticks, idle ticks), split over its fields."""
    lines = [f"cpu  {sum(b for b, _ in cpus)} 0 0 {sum(i for _, i in cpus)} 0 0 0 0 0 0"]
    for n, (busy, idle) in enumerate(cpus):
        lines.append(f"cpu{n} {busy - busy // 3} 0 {busy // 3} {idle} 0 0 0 0 0 0")
    return "\n".join([*lines, "intr 1 2 3", "ctxt 99", "procs_running 3"]) + "\n"


def self_stat(utime: int, stime: int = 0) -> str:
    tail = " ".join(["R", "1", "1", "1", "0", "-1", "0", "0", "0", "0", "0", str(utime), str(stime)] + ["0"] * 39)
    return f"4242 (python -m (trainer)) {tail}"


class FakeProc:
    """A machine of ``cores`` CPUs whose clock advances one second per sample: per sample, this process
    uses ``own`` cores and the others ``others`` cores."""

    def __init__(self, cores: int = 2) -> None:
        self.cores, self.busy, self.idle, self.own_ticks = cores, [0] * cores, [0] * cores, 0
        self.own, self.others = 0.0, 0.0

    def advance(self) -> None:
        used = min(self.cores, self.own + self.others) * HZ
        for n in range(self.cores):
            share = int(round(used / self.cores))
            self.busy[n] += share
            self.idle[n] += HZ - share
        self.own_ticks += int(round(self.own * HZ))

    def read(self) -> at.CpuSample:
        self.advance()
        return at.parse_sample(proc_stat(list(zip(self.busy, self.idle, strict=True))), self_stat(self.own_ticks))


def test_parse_sample_counts_busy_time_and_this_process_only():
    text = proc_stat([(150, 50), (30, 170)])
    sample = at.parse_sample(text, self_stat(40, 20))
    assert (sample.busy, sample.total, sample.own, sample.cpus) == (180, 400, 60, 2)
    only_first = at.parse_sample(text, self_stat(0), cpus={0})      # the affinity mask's CPUs only
    assert (only_first.busy, only_first.total, only_first.cpus) == (150, 200, 1)
    iowait = "cpu0 10 0 0 50 40 0 0 0 0 0\n"                        # waiting for the disk is not busy
    assert at.parse_sample(iowait, self_stat(0)).busy == 10


def test_others_cores_is_the_busy_time_less_our_own():
    before = at.CpuSample(busy=1000, total=4000, own=300, cpus=2)
    after = at.CpuSample(busy=1000 + 180, total=4000 + 200, own=300 + 100, cpus=2)   # one second, 2 CPUs
    assert abs(at.others_cores(before, after) - 0.8) < 1e-9
    assert at.others_cores(after, after) == 0.0                     # no time passed
    ours = at.CpuSample(busy=1200, total=4200, own=530, cpus=2)     # our ticks counted over theirs: clamped
    assert at.others_cores(before, ours) == 0.0


def test_two_cores_drop_to_one_thread_beside_a_busy_process_and_come_back_only_when_free():
    assert at.target_threads(0.1, cores=2, current=2) == 2          # the studio's GUI beside the run
    assert at.target_threads(0.55, cores=2, current=2) == 2
    assert at.target_threads(0.7, cores=2, current=2) == 1          # another process: no team
    assert at.target_threads(2.0, cores=2, current=2) == 1          # two hogs: never below one
    assert at.target_threads(0.55, cores=2, current=1) == 1         # hysteresis: still busy enough
    assert at.target_threads(0.45, cores=2, current=1) == 1
    assert at.target_threads(0.3, cores=2, current=1) == 2          # a dashboard's share: a core is free
    assert at.target_threads(2.3, cores=8, current=8) == 6          # bigger machines give up what is used
    assert at.target_threads(1.1, cores=8, current=8) == 7
    assert at.target_threads(1.5, cores=8, current=7) == 7          # between the margins: kept
    assert at.target_threads(1.5, cores=8, current=6) == 6
    assert at.target_threads(0.0, cores=8, current=3) == 8
    assert at.target_threads(5.0, cores=1, current=1) == 1


def test_load_before_the_run_is_seen_at_the_first_step_and_load_mid_run_within_a_second():
    proc, now, applied = FakeProc(cores=2), [0.0], []
    proc.own, proc.others = 1.0, 2.0                     # two hogs while the worker starts (imports)
    adaptive = at.AdaptiveThreads(2, start=proc.read(), read=proc.read, clock=lambda: now[0],
                                  turn=lambda ns: None)   # this test process's turns left alone
    adaptive.tick(applied.append)                        # the first step
    assert applied == [1] and adaptive.threads == 1
    proc.own, proc.others = 1.0, 0.0                     # the hogs are gone
    for t in (0.3, 0.6, 0.9):                            # not due yet: no sample, no change
        now[0] = t
        adaptive.tick(applied.append)
    assert applied == [1]
    now[0] = 1.0
    adaptive.tick(applied.append)
    assert applied == [1, 2]
    proc.own, proc.others = 1.0, 1.0                     # a hog starts mid-run
    now[0] = 2.0
    adaptive.tick(applied.append)
    assert applied == [1, 2, 1]


def test_a_quiet_machine_keeps_the_full_team_without_calls():
    proc, now, applied, turns = FakeProc(cores=2), [0.0], [], []
    proc.own, proc.others = 2.0, 0.05
    adaptive = at.AdaptiveThreads(2, start=proc.read(), read=proc.read, clock=lambda: now[0], turn=turns.append)
    for step in range(50):
        now[0] = step * 0.1
        adaptive.tick(applied.append)
    assert applied == [] and turns == [] and adaptive.threads == 2 and adaptive.others < 0.1


def test_a_lone_thread_beside_busy_processes_asks_for_longer_turns_and_gives_them_back():
    proc, now, applied, turns = FakeProc(cores=2), [0.0], [], []
    proc.own, proc.others = 1.0, 2.0                     # two hogs
    adaptive = at.AdaptiveThreads(2, start=proc.read(), read=proc.read, clock=lambda: now[0], turn=turns.append)
    adaptive.tick(applied.append)
    assert applied == [1] and turns == [at.TURN_NS]
    now[0] = 1.0                                         # still busy: nothing asked again
    adaptive.tick(applied.append)
    assert turns == [at.TURN_NS]
    proc.others = 0.0                                    # the hogs are gone: the team, the default turn
    now[0] = 2.0
    adaptive.tick(applied.append)
    assert applied == [1, 2] and turns == [at.TURN_NS, 0]


def slice_ns() -> int | None:
    """The calling thread's scheduler slice, where the kernel shows it (/proc/thread-self/sched)."""
    path = Path("/proc/thread-self/sched")
    lines = path.read_text().splitlines() if path.exists() else []
    return next((int(line.split(":")[1]) for line in lines if line.startswith("se.slice")), None)


@pytest.mark.skipif(sys.platform != "linux", reason="sched_setattr is Linux's")
def test_the_turn_is_asked_of_the_real_scheduler_for_the_calling_thread_only():
    seen: dict[str, object] = {}

    def on_a_thread_of_its_own() -> None:   # the test process's own threads keep their turns
        seen["before"] = slice_ns()
        seen["longer"] = at.set_turn(at.TURN_NS)
        seen["during"] = slice_ns()
        seen["default"] = at.set_turn(0)
        seen["after"] = slice_ns()

    main_before = slice_ns()
    thread = threading.Thread(target=on_a_thread_of_its_own)
    thread.start()
    thread.join(timeout=10)
    assert seen["longer"] is True and seen["default"] is True
    if seen["before"] is None:
        pytest.skip("this kernel does not show a thread's slice")
    assert seen["during"] == at.TURN_NS and seen["after"] == seen["before"]
    assert slice_ns() == main_before


def test_an_unreadable_proc_stops_adapting_and_the_steps_go_on():
    calls = []

    def broken() -> at.CpuSample:
        raise OSError("no /proc")

    adaptive = at.AdaptiveThreads(2, start=at.CpuSample(0, 0, 0, 2), read=broken, clock=lambda: 5.0)
    step = adaptive.wrap(lambda x: calls.append(x) or x, set_threads=lambda n: calls.append(("threads", n)))
    assert step(7) == 7 and step(8) == 8
    assert calls == [7, 8]
    assert at.start(2, read=broken) is None


def test_the_real_proc_reads():
    sample = at.read_sample()
    assert sample.cpus >= 1 and sample.total > 0 and sample.own >= 0


def test_adaptive_is_the_default_and_each_policy_has_its_switch():
    chosen = plan({}, cores=2)
    assert (chosen.threads, chosen.wait_policy, chosen.adaptive) == (2, None, True)
    assert plan({SWITCH: "adaptive"}, cores=4) == plan({}, cores=4)
    passive = plan({SWITCH: "passive"}, cores=2)
    assert (passive.threads, passive.wait_policy, passive.adaptive) == (2, "PASSIVE", False)
    assert not plan({SWITCH: "default"}, cores=2).adaptive
    assert not plan({SWITCH: "2"}, cores=2).adaptive
    assert not plan({"OMP_NUM_THREADS": "2"}, cores=2).adaptive   # the user's count is kept
    assert not plan({}, cores=1).adaptive                          # one core: nothing to adapt
    spin = plan({"OMP_WAIT_POLICY": "ACTIVE"}, cores=2)            # a user's wait policy is kept too
    assert (spin.wait_policy, spin.adaptive) == (None, True)


def test_a_compiled_run_waits_passively_with_every_core(tmp_path):
    """Inductor's kernels keep the thread count they were compiled with, and its cache key holds it."""
    chosen = plan({}, cores=2, compiled=True)
    assert (chosen.threads, chosen.wait_policy, chosen.adaptive) == (2, "PASSIVE", False)
    assert plan({SWITCH: "default"}, cores=2, compiled=True).wait_policy is None
    spec = tmp_path / "spec.json"
    spec.write_text('{"precision": {"compile": "default"}}')
    assert compiles(["run", str(spec), "--db", "x"])
    spec.write_text('{"precision": {"compile": "off"}}')
    assert not compiles(["run", str(spec)])
    spec.write_text("{broken")
    assert not compiles(["run", str(spec)]) and not compiles(["resume", "3"]) and not compiles([])
