"""The Runs table and charts with 1,000 runs in the store (issue 24): how long the panel takes to read the
store, poll it again, filter it and overlay curves, on a scratch SQLite store.

    QT_QPA_PLATFORM=offscreen .venv/bin/python benchmarks/runs_1000.py [--runs 1000] [--points 200]

Each run gets a spec, a small graph, ``--points`` steps of train loss, epoch and time, and 10 epochs of
val accuracy; a tenth are tagged as sweep trials. Prints the median of 5 rounds of each operation.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from PySide6.QtTest import QTest  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from studio.training.runs_dock import RunsPanel  # noqa: E402
from trainer.store.runs import RunStore  # noqa: E402


def fill(store: RunStore, runs: int, points: int) -> None:
    graph = {"schema_version": 3, "nodes": [{"id": f"n{i}", "type": "ReLU", "params": {}} for i in range(20)]}
    for k in range(runs):
        rid = store.create_run(name=f"run {k}", spec={"optim": {"name": ("adamw", "sgd")[k % 2], "lr": 1e-3 * (1 + k % 7)},
                                                     "train": {"epochs": 10, "batch_size": 32 << (k % 3)},
                                                     "data": {"dataset": "digits"}},
                               graph=graph, graph_hash=f"{k:064x}", device="cpu", params=1000 + k)
        rows = [(s, "train/loss", 2.0 / s) for s in range(1, points + 1)]
        rows += [(s, "epoch", float(1 + s * 10 // points)) for s in range(1, points + 1)]
        rows += [(s, "time", s * 0.1) for s in range(1, points + 1)]
        rows += [(e * points // 10, "val/accuracy", 0.5 + e / 25) for e in range(1, 11)]
        store.add_metrics(rid, rows)
        store.finish(rid, "completed", epoch=10, step=points)
        if k % 10 == 0:
            store.update_run(rid, tags=["study:bench", f"trial:{k // 10}"])


def timed(fn, rounds: int = 5) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        QApplication.processEvents()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--points", type=int, default=200)
    args = ap.parse_args()
    app = QApplication.instance() or QApplication(sys.argv[:1])  # noqa: F841 - kept alive for the widgets
    url = f"sqlite:///{Path(tempfile.mkdtemp(prefix='runs-bench-')) / 'runs.sqlite'}"
    store = RunStore(url)
    t = time.perf_counter()
    fill(store, args.runs, args.points)
    print(f"filled {args.runs} runs x {args.points * 3 + 10} metric rows in {time.perf_counter() - t:.1f} s")
    t = time.perf_counter()
    panel = RunsPanel(store)
    panel.resize(1300, 850)
    panel.show()
    QTest.qWait(50)
    print(f"first read and show:                 {time.perf_counter() - t:8.3f} s")
    print(f"a poll (store re-read, rows updated): {timed(panel.refresh):8.3f} s")
    for text in ("run 99", "tag:study", "optim.name=sgd batch_size>=64"):
        def filt(text: str = text) -> None:     # cleared and set: two passes over the rows
            panel.filter.clear()
            panel.filter.setText(text)
        print(f"filter {text!r:31} {timed(filt):8.3f} s ({panel.proxy.rowCount()} rows)")
        panel.filter.clear()
    ids = [r.id for r in store.runs()][:5]
    panel.select_ids(ids)
    panel.metric_box.setCurrentIndex(panel.metric_box.findData("train/loss"))
    print(f"overlay 5 runs' train loss, smoothed: {timed(panel.overlay_selected):8.3f} s")
    panel.curves.x_axis.setCurrentText("wall time")
    print(f"the same on wall time:                {timed(panel.overlay_selected):8.3f} s")
    panel.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
