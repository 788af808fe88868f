"""How fast the studio's window appears, against a bare PySide6 window in the same run.

Each figure is the wall time from launching a process (offscreen Qt) to the line it prints
once its window has shown; the studio prints it when ``TORCH_STUDIO_REPORT_STARTUP=1``. A
300-node graph is then opened and fitted the same way (the studio times that itself). The
import of torch alone is timed too: it is what the studio keeps off its start-up path.
Figures and ratios only, medians of several runs; the machine is whatever runs this.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from graph_editor.model import Graph, InputSpec, save_graph  # noqa: E402

RUNS = 5
BASELINE = """
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QMainWindow
app = QApplication([])
w = QMainWindow()
w.resize(1600, 1000)
w.show()
QTimer.singleShot(0, lambda: (print("shown", flush=True), app.quit()))
app.exec()
"""


def studio_command() -> list[str]:
    script = Path(sys.executable).with_name("torch-studio")
    return [str(script)] if script.exists() else [sys.executable, "-m", "studio"]


def timed_lines(cmd: list[str], env: dict[str, str], lines: int) -> list[tuple[float, str]]:
    """Launch ``cmd`` and return (seconds since launch, text) for its first ``lines`` lines."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    out = []
    assert proc.stdout is not None
    for _ in range(lines):
        line = proc.stdout.readline()
        if not line:
            break
        out.append((time.perf_counter() - t0, line.strip()))
    proc.wait(timeout=120)
    if len(out) < lines:
        raise RuntimeError(f"{' '.join(cmd)} printed {len(out)} of {lines} lines (exit {proc.returncode})")
    return out


def big_graph(path: Path, blocks: int = 98) -> int:
    """Input, ``blocks`` Conv-BN-ReLU blocks, then pooling, Flatten, Dropout, Linear and Output:
    300 nodes when ``blocks`` is 98, placed in rows of 25 as a person might."""
    g = Graph(InputSpec((3, 32, 32)), 10)
    steps: list[tuple] = []
    for i in range(blocks):
        steps += [("Conv2d", f"conv{i}", {"out_channels": 16, "padding": [1, 1]}), ("BatchNorm2d", f"bn{i}"),
                  ("ReLU", f"relu{i}")]
    steps += [("AdaptiveAvgPool2d", "pool", {"output_size": [1, 1]}), ("Flatten", "flatten"),
              ("Dropout", "dropout"), ("Linear", "fc", {"out_features": 10}), ("Output", "output")]
    g.add_node("Input", "input")
    g.chain(*steps, start="input")
    for i, node in enumerate(g):
        node.position = (float(i % 25) * 200.0, float(i // 25) * 160.0)
    save_graph(g, path)
    return len(g)


def main() -> None:
    scratch = Path(tempfile.mkdtemp(prefix="studio-bench-"))
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "TORCH_STUDIO_REPORT_STARTUP": "1",
           "HOME": str(scratch), "XDG_CONFIG_HOME": str(scratch / "config"), "XDG_DATA_HOME": str(scratch / "data")}
    graph_file = scratch / "big.graph.json"
    nodes = big_graph(graph_file)
    try:
        base, studio, opened, open_wall, in_run, torch_import = [], [], [], [], [], []
        for _ in range(RUNS):
            base.append(timed_lines([sys.executable, "-c", BASELINE], env, 1)[0][0])
            (t_shown, line), = timed_lines(studio_command(), env, 1)
            report = json.loads(line)
            assert not report["torch_imported"], "torch was imported before the window showed"
            studio.append(t_shown)
            in_run.append(report["in_run_s"])
            (_, _), (t_open, line2) = timed_lines(studio_command() + [str(graph_file)], env, 2)
            report2 = json.loads(line2)
            assert report2["ok"] and report2["nodes"] == nodes
            opened.append(report2["open_fit_s"])
            open_wall.append(t_open)
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", "import torch"], check=True)
            torch_import.append(time.perf_counter() - t0)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    med = statistics.median

    def row(label: str, seconds: float, note: str = "") -> None:
        print(f"  {label:<40}{seconds:6.3f} s   {note}".rstrip())

    print(f"startup, median of {RUNS} (offscreen Qt; {os.cpu_count()} CPUs)")
    row("bare PySide6 QMainWindow shown", med(base))
    row("torch-studio window shown", med(studio),
        f"ratio {med(studio) / med(base):4.2f}x the bare window (target: under 1.5 s)")
    row("  of which inside studio.app.run", med(in_run))
    row("python -c 'import torch' alone", med(torch_import), "(kept off the start-up path)")
    row(f"open + fit a {nodes}-node graph", med(opened), "(target: under 1 s)")
    row(f"launch to a {nodes}-node graph on screen", med(open_wall))

if __name__ == "__main__":
    main()
