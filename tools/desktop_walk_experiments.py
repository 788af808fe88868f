"""The Experiments walk of issue 24, repeatable: a new user's sweep in the real studio under a real X
server (Xvfb, 1440x900, a fresh HOME: no run store yet), driven only by real X events.

    .venv/bin/python tools/desktop_walk_experiments.py [--out FOLDER] [--trials N]

Steps: open the Digits CNN template, mark conv1's width as a sweep variable in the Inspector (drawn on
the canvas), enter Experiments (a new user's empty page), New Sweep (N trials, 2 at a time, 2 epochs,
a batch of 4096 in the space and a 64 MiB budget), watch it live, then with its best trial: Open
Graph (Design), Export ONNX (verified against onnxruntime), Retrain on Train+Val (a new run); then in
Runs compare two trials (train loss, smoothing, wall time, log y), diff their recipes, tag one and
filter by the tag. After each step the window must still be 1440 px wide (a long status line once
made it 1985) and the studio's stderr free of tracebacks. Needs what tools/desktop_walk.py needs.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from desktop_walk_x import WIDTH, Walk, WalkFailed, drive  # noqa: E402 - the tools folder is no package

ROW_Y = (159, 189, 218, 247, 276)     # the Runs table's first rows at 1440x900 (newest first)


def store(w: Walk) -> Path:
    return w.scratch / "home" / ".local" / "share" / "torch-studio" / "runs.sqlite"


def query(w: Walk, sql: str) -> list[tuple]:
    """Rows of ``sql`` on the studio's run store (its Optuna tables too); [] while it does not exist."""
    if not store(w).exists():
        return []
    with sqlite3.connect(f"file:{store(w)}?mode=ro", uri=True, timeout=30) as conn:
        try:
            return conn.execute(sql).fetchall()
        except sqlite3.OperationalError:     # the sweep is still making its tables
            return []


def wait_for(what: str, done, timeout: float, w: Walk) -> None:
    end = time.monotonic() + timeout
    while not done():
        w.check_alive()
        if time.monotonic() > end:
            raise WalkFailed(f"{what} did not happen within {timeout:.0f} s")
        time.sleep(1)


def check_width(w: Walk) -> None:
    geo = w.xdo("getwindowgeometry", "--shell", w.main_id)
    width = int(dict(line.split("=", 1) for line in geo.splitlines() if "=" in line)["WIDTH"])
    if width != WIDTH:
        raise WalkFailed(f"the main window is {width} px wide on a {WIDTH} px screen (something widened it)")


def run_experiments_walk(w: Walk, trials: int) -> None:
    def start() -> None:
        w.open_main_window()

    def template() -> None:
        w.key("ctrl+shift+n")
        w.wait_window(r"^New from template$", 60)
        w.key("Return")                      # Digits CNN, the first card
        w.wait_gone(r"^New from template$")
        w.wait_window(r"^Digits CNN")
        time.sleep(1.5)

    def sweep_variable() -> None:
        w.focus_main()
        w.click(451, 208)                    # conv1's title on the canvas
        time.sleep(1)
        w.click(1324, 443)                   # its Inspector line "⇄ out_channels"
        w.type("16..32:step16")
        w.key("Return")
        time.sleep(1)

    def experiments() -> None:
        w.click(340, 39)                     # the mode bar's Experiments
        time.sleep(12)                       # its view is built on the first entry (pyqtgraph, Optuna)

    def new_sweep() -> None:
        w.click(56, 105)                     # New Sweep…
        x, y, _w, _h = w.wait_window(r"^New Sweep$", 30)
        for dy, text in ((48, str(trials)), (98, "2")):      # trials, epochs ("at a time" stays 2)
            w.click(x + 370, y + dy)
            w.key("ctrl+a")
            w.type(text)
        w.click(x + 370, y + 124)            # the space: the learning rate and conv1's width, then a batch
        w.key("End")
        w.type(",batch_size=32|64|4096")
        w.click(x + 370, y + 180)            # the memory budget
        w.type("64MiB")
        time.sleep(1.5)                      # the space is checked as it is typed
        w.shot(f"{w.step_no:02d}_new_sweep_dialog")
        w.click(x + 494, y + 276)            # Start sweep
        w.wait_gone(r"^New Sweep$", 30)
        w.focus_main()
        time.sleep(2)

    def live() -> None:
        wait_for("a running trial", lambda: query(w, "SELECT 1 FROM trials WHERE state = 'RUNNING'"), 240, w)
        time.sleep(12)                       # the workspace re-reads the study every 2 s

    def finished() -> None:
        wait_for("the end of the sweep", lambda: not [p for p in w.workers() if _is_sweep(p)], 900, w)
        time.sleep(4)
        rows = query(w, "SELECT t.number, t.state, a.value_json FROM trials t LEFT JOIN trial_user_attributes a "
                        "ON a.trial_id = t.trial_id AND a.key = 'reason' ORDER BY t.number")
        print(f"[walk]   trials: {rows}", flush=True)
        if len(rows) != trials or any(state not in ("COMPLETE", "PRUNED") for _n, state, _r in rows):
            raise WalkFailed(f"the sweep did not end with {trials} complete or pruned trials: {rows}")
        stopped = query(w, "SELECT id, name FROM runs WHERE status = 'stopped' AND tags LIKE '%study:%'")
        if stopped:      # a trial's run the sweep pruned says so in Runs, with the rule (it read "stopped")
            raise WalkFailed(f"trial runs read 'stopped', not 'pruned': {stopped}")

    def open_graph() -> None:
        w.click(1132, 105)                   # Open Graph (no row chosen: the best trial)
        _answer(w, "Unsaved changes", lambda x, y, ww, hh: w.click(x + ww - 140, y + hh - 26))   # Discard
        w.wait_window(r" trial \d+ — Torch Studio$", 30)
        time.sleep(2)

    def export_onnx() -> None:
        w.click(340, 39)                     # back to Experiments
        time.sleep(2)
        w.click(1234, 105)                   # Export ONNX…
        w.wait_window(r"^Export ONNX$", 60)
        wait_for("the exported file", lambda: list(w.scratch.rglob("*.onnx")), 120, w)
        time.sleep(8)                        # its proof with onnxruntime
        w.shot(f"{w.step_no:02d}_export_dialog")
        w.focus(r"^Export ONNX$")
        w.key("Escape")
        w.wait_gone(r"^Export ONNX$", 30)
        w.focus_main()

    def retrain() -> None:
        w.click(1361, 105)                   # Retrain on Train+Val
        wait_for("the train+val run", lambda: query(
            w, "SELECT 1 FROM runs WHERE name LIKE '%(train+val)' AND status = 'completed'"), 300, w)
        tags = query(w, "SELECT tags FROM runs WHERE name LIKE '%(train+val)'")
        if not tags or '"retrain"' not in tags[0][0] or '"study:' not in tags[0][0]:
            raise WalkFailed(f"the retrained run is not tagged with its study and 'retrain': {tags}")
        time.sleep(3)

    def runs_overlay() -> None:
        w.focus_main()
        w.key("ctrl+3")
        time.sleep(3)
        w.click(200, ROW_Y[1])               # two trials' runs
        w.xdo("keydown", "ctrl")
        w.click(200, ROW_Y[2])
        w.xdo("keyup", "ctrl")
        w.click(1131, 100)                   # Overlay
        w.click(560, 432)                    # the metric: val accuracy -> train loss
        w.key("Down", "Down", "Return")
        w.click(1230, 432)                   # smoothing 0.8
        w.key("ctrl+a")
        w.type("0.8")
        w.key("Tab")
        w.click(1332, 432)                   # x: step -> wall time
        w.key("Down", "Down", "Return")
        w.click(1389, 432)                   # log y
        time.sleep(2)

    def runs_diff() -> None:
        w.click(1218, 100)                   # Diff
        time.sleep(2)

    def tag_and_filter() -> None:
        w.click(200, ROW_Y[1])
        w.click(148, 409)                    # Details: the run's tags and notes
        w.click(725, 736)
        w.key("End")
        w.type(", keep")
        w.click(725, 790)
        w.type("the walk's pick")
        w.click(68, 859)                     # Save Tags & Notes
        time.sleep(1)
        w.click(400, 100)                    # the filter
        w.type("tag:keep")
        time.sleep(2)
        tagged = query(w, "SELECT id FROM runs WHERE tags LIKE '%\"keep\"%'")
        if len(tagged) != 1:
            raise WalkFailed(f"one run should carry the tag 'keep': {tagged}")

    def filter_recipe() -> None:
        w.click(400, 100)
        w.key("ctrl+a")
        w.type("batch_size=64")
        time.sleep(2)

    steps = [("start", start), ("template", template), ("sweep_variable", sweep_variable),
             ("experiments_empty", experiments), ("new_sweep", new_sweep), ("sweep_live", live),
             ("sweep_finished", finished), ("open_best_graph", open_graph), ("export_best", export_onnx),
             ("retrain_best", retrain), ("runs_overlay", runs_overlay), ("runs_diff", runs_diff),
             ("tag_and_filter", tag_and_filter), ("filter_recipe", filter_recipe)]
    for name, action in steps:
        w.step(name, action)
        check_width(w)


def _is_sweep(pid: int) -> bool:
    try:
        return b"sweep" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _answer(w: Walk, title: str, click, timeout: float = 20) -> None:
    """Click the studio's question titled ``title`` if it comes within ``timeout``."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for _wid, name, rect in w.windows():
            if name == title and rect[2] > 50:
                time.sleep(0.8)
                w.shot(f"{w.step_no:02d}_prompt")
                click(*rect)
                return
        time.sleep(0.3)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(Path(tempfile.gettempdir()) / "torch-studio-experiments-walk"),
                        help="folder for the screenshots and the studio's stderr")
    parser.add_argument("--trials", type=int, default=6, help="trials of the sweep (2 at a time, 2 epochs each)")
    args = parser.parse_args()
    os.environ.pop("TORCH_STUDIO_DB", None)
    return drive("experiments walk", Path(args.out), lambda walk: run_experiments_walk(walk, args.trials))


if __name__ == "__main__":
    raise SystemExit(main())
