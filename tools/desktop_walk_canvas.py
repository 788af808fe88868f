"""The canvas walk of issue 26, repeatable: the real studio under a real X server (Xvfb, 1440x900), the
canvas driven only by real X events, then a 20,000-layer graph opened through File > Open.

    .venv/bin/python tools/desktop_walk_canvas.py [--out FOLDER]

Steps: open ResNet-18 from the gallery, fit, pan (middle-button drag), zoom in and out with the wheel
(in and out of the zoomed-out tiles of graph_editor/ui/far_view.py), File > New, drag the Input node
(the title gains its "*"), undo, open a 20,000-layer chain with File > Open, wait for its analysis, then
pan, zoom in and drag a node of it. After each step the studio's stderr is read for a traceback and the
process for a crash; the screen is saved as ``NN_step.png``. Needs what tools/desktop_walk.py needs; it
uses its Walk.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from desktop_walk_x import ROOT, Walk, WalkFailed, drive  # noqa: E402 - the tools folder is no package

sys.path.insert(0, str(ROOT))
from benchmarks.graph_load import chain_text  # noqa: E402

CANVAS = (700, 450)   # a point on the canvas in the default Design layout at 1440x900
CANVAS_AREA = "860x500+240+70"   # the canvas's pixels in that layout (width x height + left + top)


def canvas_pixels(w: Walk) -> bytes:
    """What the canvas shows now (raw pixels of its area of the screen)."""
    return subprocess.run(["import", "-display", w.display, "-window", "root", "-crop", CANVAS_AREA, "rgb:-"],
                          capture_output=True, check=False, timeout=60).stdout


def until_changed(w: Walk, before: bytes, what: str, timeout: float = 30) -> None:
    """Wait until the canvas shows something else than ``before`` (a fit of a big graph may take a while on a
    loaded machine: a fixed sleep took the screenshot before it, and the walk passed without a fit)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(0.5)
        if canvas_pixels(w) != before:
            return
    raise WalkFailed(f"{what}: the canvas did not change in {timeout:.0f} s")


def wheel(w: Walk, steps: int, at: tuple[int, int] = CANVAS) -> None:
    """``steps`` wheel notches at ``at``: positive zooms in, negative out."""
    w.xdo("mousemove", *at)
    time.sleep(0.1)
    for _ in range(abs(steps)):
        w.xdo("click", 4 if steps > 0 else 5)
        time.sleep(0.05)
    time.sleep(0.6)   # past the zoom's settling: the tiles of the new scale


def middle_drag(w: Walk, start: tuple[int, int], end: tuple[int, int]) -> None:
    w.xdo("mousemove", *start)
    time.sleep(0.1)
    w.xdo("mousedown", 2)
    for i in range(1, 11):
        w.xdo("mousemove", start[0] + (end[0] - start[0]) * i // 10, start[1] + (end[1] - start[1]) * i // 10)
        time.sleep(0.03)
    w.xdo("mouseup", 2)
    time.sleep(0.5)


def run_canvas_walk(w: Walk, chain: Path) -> None:
    def template() -> None:
        w.key("ctrl+shift+n")
        w.wait_window(r"^New from template$", 60)
        w.pick_resnet18()

    def fit() -> None:
        w.focus_main()
        w.click(600, 580)
        w.key("ctrl+0")
        time.sleep(1)

    def fit_big() -> None:   # zoomed in on the chain's middle: the fit must change what the canvas shows
        w.focus_main()
        w.click(600, 580)
        before = canvas_pixels(w)
        w.key("ctrl+0")
        until_changed(w, before, "Fit View (Ctrl+0) of the 20,000-layer chain")
        time.sleep(1)

    def zoom() -> None:
        wheel(w, -6)                         # out: nodes become blocks, drawn from tiles
        wheel(w, 14)                         # in: every label
        wheel(w, -8)

    def new_and_drag() -> None:
        w.key("ctrl+n")
        w.wait_window(r"^Untitled ")
        time.sleep(1)
        w.drag((445, 316), (445, 420), (445, 520))   # the Input node by its title
        w.wait_window(r"^Untitled\* ")
        w.key("ctrl+z")
        w.wait_window(r"^Untitled ")

    def open_chain() -> None:
        w.key("ctrl+o")
        w.wait_window(r"^Open graph$")
        w.focus(r"^Open graph$")
        w.type(str(chain))
        w.key("Return")
        w.wait_gone(r"^Open graph$")
        w.wait_window(r"^chain", 120)
        time.sleep(25)                        # validation, first paint, the analysis in the background

    def big_canvas() -> None:
        w.focus_main()
        middle_drag(w, (900, 450), (500, 420))
        wheel(w, 8)
        wheel(w, -3)

    w.step("start", w.open_main_window)
    w.step("resnet18", template)
    w.step("fit", fit)
    w.step("pan", lambda: middle_drag(w, (800, 500), (500, 400)))
    w.step("zoom", zoom)
    w.step("new_drag_undo", new_and_drag)
    w.step("open_20k", open_chain)
    w.step("pan_zoom_20k", big_canvas)
    w.step("fit_20k", fit_big)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(Path(tempfile.gettempdir()) / "torch-studio-canvas-walk"),
                        help="folder for the screenshots and the studio's stderr")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        chain = Path(tmp) / "chain20k.graph.json"
        chain.write_text(chain_text(20_000))
        return drive("canvas walk", Path(args.out), lambda walk: run_canvas_walk(walk, chain))


if __name__ == "__main__":
    raise SystemExit(main())
