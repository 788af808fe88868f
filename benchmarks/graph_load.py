"""How long a large graph file takes to load and validate, and a cycle to be reported.

Chains of 1,000 / 5,000 / 20,000 layers (Input, ReLUs, Linear, Output) as graph-file text, and a
ring of 5,000 (a cycle through every layer). It prints, as the median of a few runs in CPU time
(the machine may be shared), ``loads()`` (parse, check every node and edge, build the Graph),
``validate()`` (structure, parameters, shape inference; for the ring, the cycle report) and, as
the floor any loader pays, ``json.loads`` of the same text with its ratio. Time per node should
not grow with the size: loading used to be quadratic (a 5,000-node chain took 2.3 s to load, a
20,000-node chain 69 s to validate, a 5,000-node ring 19-25 s); the goal is 20,000 nodes loaded and
validated in under a second.

``--window`` then opens the 20,000-layer chain in the studio's main window (offscreen Qt), as File >
Open does, and prints the wall time of each phase: the file read and the canvas items built (the
call returns), the validation shown (``inferred``), the analysis shown (``analyzed``: parameters,
FLOPs, memory; the summary table filled) and the first paint of the window. Goal: under 2 s in all
(it took 44 s when the summary dock rebuilt ``set(order)`` for every node). No assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from graph_editor.model import loads, validate  # noqa: E402


def chain_text(n: int, ring: bool = False) -> str:
    nodes = [{"id": "input", "type": "Input", "position": [0, 0]}]
    nodes += [{"id": f"r{i}", "type": "ReLU", "params": {}, "position": [180 * i, 0]} for i in range(n)]
    nodes += [{"id": "fc", "type": "Linear", "params": {"out_features": 10}}, {"id": "output", "type": "Output"}]
    ids = [node["id"] for node in nodes]
    edges = [{"src": a, "src_port": "out", "dst": b, "dst_port": "in"} for a, b in zip(ids, ids[1:], strict=False)]
    if ring:
        edges.append({"src": f"r{n - 1}", "dst": "r0"})
    return json.dumps({"schema_version": 2, "input": {"shape": [16], "dtype": "float32"}, "num_classes": 10,
                       "nodes": nodes, "edges": edges}, indent=1)


def cpu_time(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return statistics.median(times)


def window_open(n: int) -> None:
    """Open an ``n``-layer chain in the studio's main window and time each phase (wall clock)."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QEventLoop, QTimer
    from PySide6.QtWidgets import QApplication

    from studio.app import build
    from studio.prompts import QtPrompts
    from studio.settings import StudioSettings

    app = QApplication.instance() or QApplication(sys.argv[:1])
    import graph_editor.analysis  # noqa: F401 - torch loaded before the clock starts, as the studio does at start
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path = folder / "chain.graph.json"
        path.write_text(chain_text(n))
        window = build(app, StudioSettings.at(folder / "settings.ini"), QtPrompts(lambda _: None, lambda _: None),
                       folder / "recovery", runs_db=f"sqlite:///{folder / 'runs.sqlite'}", blocks_dir=folder / "blocks")
        window.resize(1440, 900)
        window.show()
        app.processEvents()
        marks: dict[str, float] = {}
        loop = QEventLoop()
        window.live.inferred.connect(lambda _: marks.setdefault("validation shown", time.perf_counter()))

        def analysed(*_: object) -> None:
            if "validation shown" in marks:     # the new graph's (not an earlier graph's pending one)
                marks.setdefault("analysis shown", time.perf_counter())
                loop.quit()

        window.live.analyzed.connect(analysed)
        t0, cpu0 = time.perf_counter(), time.process_time()
        window.files.open(str(path))
        marks["file read, items built"] = time.perf_counter()
        QTimer.singleShot(120_000, loop.quit)
        loop.exec()
        app.processEvents()
        window.grab()
        marks["first paint"] = time.perf_counter()
        print(f"\nthe studio's window opening a chain of {n:,} layers (wall clock):")
        for name, at in sorted(marks.items(), key=lambda kv: kv[1]):
            print(f"  {name:<24} {at - t0:7.2f} s")
        print(f"  goal: first paint under 2 s; CPU time {time.process_time() - cpu0:.2f} s; "
              f"load average {os.getloadavg()[0]:.1f}")
        window.document.undo_stack.setClean()
        window.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", action="store_true", help="also open the 20,000-layer chain in the window")
    args = parser.parse_args()
    print(f"{'graph':<16} {'json.loads':>10} {'loads':>8} {'ratio':>6} {'validate':>9} {'total':>7} {'us/node':>8}")
    for n, ring in ((1000, False), (5000, False), (20000, False), (5000, True)):
        text = chain_text(n, ring)
        repeats = 5 if n <= 5000 else 3
        parse = cpu_time(lambda text=text: json.loads(text), repeats)
        load = cpu_time(lambda text=text: loads(text), repeats)
        graph = loads(text)
        check = cpu_time(lambda graph=graph: validate(graph), repeats)
        inf = validate(graph)
        if ring:
            assert sum("cycle" in p.message for p in inf.problems) == n  # the report is complete, not just fast
        name = f"{'ring' if ring else 'chain'} {n}"
        total = load + check
        print(f"{name:<16} {parse:>9.3f}s {load:>7.3f}s {load / parse:>5.1f}x {check:>8.3f}s {total:>6.3f}s "
              f"{1e6 * total / (n + 3):>8.1f}")
    if args.window:
        window_open(20_000)


if __name__ == "__main__":
    main()
