"""Does the studio's event loop stay responsive while a run streams events into the dashboard?

A 5 ms QTimer records the gap between its ticks; a gap longer than 5 ms is a stall of the event
loop (nothing else could run: no repaint, no click). Three phases in one process, same window:

1. idle: the dashboard shown, no worker (the floor: what the machine and Qt give anyway);
2. the real worker, ``python -m trainer run`` on the digits with ``metrics_interval_s`` at its floor, 0.1 s,
   its fastest rate (10 metrics events a second, over twice its default);
3. a synthetic worker: a process writing protocol-valid events (metrics, memory, an epoch_end with
   a confusion matrix every 2,000 events) as fast as it can, for a few seconds;
4. the same flood into curves that already hold a million points each (a long run's history,
   loaded when the run starts): the downsampling and clip-to-view path under load.

Printed: events received and their rate, the longest and the 99th-percentile stall of each phase,
and the ratio to idle. Goal: no stall above 50 ms. Offscreen Qt, a 1600x1000 dashboard.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from PySide6.QtCore import QElapsedTimer, QEventLoop, Qt, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from studio.training.dashboard import CURVES, TrainingDashboard  # noqa: E402
from studio.training.session import TrainingSession  # noqa: E402

TICK_MS = 5
GOAL_MS = 50.0
HISTORY = 1_000_000  # points per step curve in phase 4

SYNTHETIC = r"""
import sys, time, random
from trainer.protocol import events as ev
seconds, first = float(sys.argv[1]), int(sys.argv[2])
classes = [str(i) for i in range(10)]
out = sys.stdout
out.write(ev.RunStarted(run_id=1, name="synthetic", device="cpu", params=1000, epochs=1000,
                        steps_per_epoch=10**6, batch_size=64, train_size=64 * 10**6, val_size=1000, test_size=0,
                        classes=classes, start_step=0, precision="fp32", compile="off", run_dir="").to_json() + "\n")
out.flush()
time.sleep(float(sys.argv[3]))   # a pause after run_started (phase 4 loads the history then)
t0, step = time.monotonic(), first
while time.monotonic() - t0 < seconds:
    step += 1
    out.write(ev.Metrics(run_id=1, step=step, epoch=1 + step // 2000, loss=2.3 / (1 + step / 500),
                         accuracy=min(1.0, step / 5000), lr=3e-3, samples_per_s=50000.0 + random.random()).to_json() + "\n")
    if step % 50 == 0:
        out.write(ev.Memory(run_id=1, step=step, device="cpu", rss=int(4e8) + step, peak_rss=int(5e8)).to_json() + "\n")
    if step % 2000 == 0:
        m = [[90 if i == j else 1 for j in range(10)] for i in range(10)]
        out.write(ev.EpochEnd(run_id=1, epoch=step // 2000, step=step, train_loss=0.5, train_accuracy=0.9,
                              val_loss=0.4, val_accuracy=0.92, lr=3e-3, seconds=1.0, best=False,
                              confusion=m).to_json() + "\n")
out.write(ev.Finished(run_id=1, status="completed", epoch=1, step=step, best=None, test_loss=None,
                      test_accuracy=None, test_per_class=None, test_confusion=None, seconds=seconds).to_json() + "\n")
out.flush()
"""


class StallMeter:
    """Records the gaps between ticks of a precise 5 ms timer, and the GUI thread's own CPU time in
    each gap: a gap is the studio's own work (CPU time) plus time the OS gave the CPU to others."""

    def __init__(self) -> None:
        self.gaps: list[float] = []
        self.cpu: list[float] = []
        self._clock = QElapsedTimer()
        self._timer = QTimer(interval=TICK_MS)
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.timeout.connect(self._tick)
        self._last = 0

    def start(self) -> None:
        self.gaps.clear()
        self.cpu.clear()
        self._clock.start()
        self._last = self._clock.nsecsElapsed()
        self._last_cpu = time.thread_time()
        self._timer.start()

    def stop(self) -> tuple[np.ndarray, np.ndarray]:
        """Stalls (gap beyond the 5 ms period) and the GUI thread's CPU time per gap, in ms."""
        self._timer.stop()
        return np.maximum(np.asarray(self.gaps) - TICK_MS, 0.0), np.asarray(self.cpu)

    def _tick(self) -> None:
        now, cpu = self._clock.nsecsElapsed(), time.thread_time()
        self.gaps.append((now - self._last) / 1e6)
        self.cpu.append((cpu - self._last_cpu) * 1e3)
        self._last, self._last_cpu = now, cpu


def run_until(done, timeout_s: float) -> None:
    loop = QEventLoop()
    check = QTimer(interval=50)
    check.timeout.connect(lambda: loop.quit() if done() else None)
    check.start()
    QTimer.singleShot(int(timeout_s * 1000), loop.quit)
    loop.exec()
    check.stop()


def phase(name: str, meter: StallMeter, work, done, timeout_s: float, counter: list[int], ready=None) -> dict:
    """Measure from ``work()`` until ``done()``; with ``ready``, from when ``ready()`` holds instead."""
    counter[0] = 0
    meter.start()
    t0 = time.perf_counter()
    work()
    if ready is not None:
        run_until(ready, timeout_s)
        counter[0] = 0
        meter.start()
        t0 = time.perf_counter()
    run_until(done, timeout_s)
    seconds = time.perf_counter() - t0
    stalls, cpu = meter.stop()
    return {"phase": name, "events": counter[0], "rate": counter[0] / seconds, "seconds": seconds,
            "max": float(stalls.max()) if stalls.size else 0.0,
            "p99": float(np.percentile(stalls, 99)) if stalls.size else 0.0,
            "cpu_max": float(cpu.max()) if cpu.size else 0.0,
            "cpu_p99": float(np.percentile(cpu, 99)) if cpu.size else 0.0, "load": os.getloadavg()[0]}


def main() -> int:
    app = QApplication.instance() or QApplication([])
    dash = TrainingDashboard()
    dash.resize(1600, 1000)
    dash.show()
    tmp = Path(tempfile.mkdtemp(prefix="gui-bench-"))
    session = TrainingSession(dash, f"sqlite:///{tmp / 'runs.sqlite'}", tmp / "launches")
    counter = [0]
    session.bridge.event.connect(lambda _e: counter.__setitem__(0, counter[0] + 1))
    ended = {"flag": False}
    session.bridge.exited.connect(lambda _c: ended.__setitem__("flag", True))
    meter = StallMeter()
    graph = json.loads((ROOT / "assets/templates/digits_cnn.graph.json").read_text())
    spec = {"name": "bench", "model": {"graph": graph}, "device": "cpu",
            "train": {"epochs": 6, "batch_size": 32, "metrics_interval_s": 0.1}}

    def start_synthetic(first_step: int = 0, pause_s: float = 0.0) -> None:
        ended["flag"] = False
        session.bridge.start("-", "", tmp / "synthetic.log", cwd=ROOT,
                             command=[sys.executable, "-c", SYNTHETIC, "4", str(first_step), str(pause_s)])

    steps = np.arange(HISTORY, dtype=np.float64)
    history = {"train/loss": 2.3 / (1 + steps / 500), "train/accuracy": np.minimum(1.0, steps / 5000),
               "lr": np.full(HISTORY, 3e-3), "samples_per_s": 50000.0 + np.random.default_rng(0).random(HISTORY)}

    def load_history(_run_id: int) -> None:
        """Once the long run has started (and the dashboard was cleared for it): its first million steps."""
        if not long_run["on"]:
            return
        for name, ys in history.items():
            curve = CURVES[name]
            dash.plots[curve.plot].append(curve.label, steps, ys)
        long_run["on"] = False

    long_run = {"on": False}
    session.run_started.connect(load_history)

    def start_long() -> None:
        long_run["on"] = True
        start_synthetic(HISTORY, pause_s=1.5)

    def start_real() -> None:
        ended["flag"] = False
        session.start(spec)

    run_until(lambda: False, 1.0)  # first paint of the window, outside any measurement
    results = [
        phase("idle", meter, lambda: None, lambda: False, 3.0, counter),
        phase("real worker", meter, start_real, lambda: ended["flag"], 240.0, counter),
        phase("synthetic flood", meter, start_synthetic, lambda: ended["flag"], 120.0, counter),
        # Measured from when the history is in (loading 4 million points is not streaming).
        phase("flood, 1M history", meter, start_long, lambda: ended["flag"], 120.0, counter,
              ready=lambda: not long_run["on"]),
    ]
    idle = max(results[0]["max"], 1.0)
    print(f"{os.cpu_count()} CPUs; 'own' = the GUI thread's CPU time within a gap, the rest of a stall is the "
          "OS running other processes (the worker itself, anything else on the machine)")
    print(f"{'phase':<18} {'events':>7} {'ev/s':>6} {'max stall':>10} {'p99':>6} {'max/idle':>9} "
          f"{'own max':>8} {'own p99':>8} {'load':>5}")
    for r in results:
        print(f"{r['phase']:<18} {r['events']:>7} {r['rate']:>6.0f} {r['max']:>8.1f}ms {r['p99']:>6.1f} "
              f"{r['max'] / idle:>9.1f} {r['cpu_max']:>8.1f} {r['cpu_p99']:>8.1f} {r['load']:>5.1f}")
    worst, own = max(r["max"] for r in results[1:]), max(r["cpu_max"] for r in results[1:])
    print(f"goal: no stall above {GOAL_MS:.0f} ms while streaming -> {'met' if worst <= GOAL_MS else 'NOT met'} "
          f"(worst {worst:.1f} ms wall, of which the studio's own work at most {own:.1f} ms); "
          f"plot points drawn: {sum(p.point_count() for p in dash.plots.values())}")
    app.processEvents()
    return 0


if __name__ == "__main__":
    sys.exit(main())
