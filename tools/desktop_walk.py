"""The desktop walk of issue 13, repeatable: the real studio under a real X server, driven only by
real X events (xdotool: mouse moves, clicks, drags at window coordinates, key presses, typing).

    .venv/bin/python tools/desktop_walk.py [--out FOLDER] [--size 1280x800]      (or: make walk)

Needs ``Xvfb``, ``xdotool`` and ``import`` (ImageMagick): ``apt-get install -y xvfb xdotool
imagemagick``. It starts its own Xvfb (1440x900x24 unless ``--size`` says otherwise, on a free display
number; no window manager: the main window sits at 0,0 and is sized to the screen), runs ``python -m studio`` with QT_QPA_PLATFORM=xcb and a scratch
HOME and XDG folders (QSettings, the recovery folder and the run store all live under them; a
TORCH_STUDIO_DB of the caller is dropped), so the user's settings and runs are untouched.

The steps: open the template gallery, open ResNet-18, Fit, File > New, drag a Linear in from
Layers, wire Input -> Linear -> Output, edit every Network field (input shape, dtype, classes),
train on the digits, pause, resume, click a cell of the live confusion matrix (its samples must show),
stop, Runs, export ONNX, switch theme, and quit during a second
run (answering "Stop the run"). After each step the studio's stderr is read for a Python traceback
or a Qt "already deleted" warning and the process for a crash, and the screen is saved as
``NN_step.png`` in the output folder. The exit status is non-zero, naming the step, on the first
failure.

Positions are the layout's at 1440x900 in the default dock layout (a fresh HOME has no saved
layout), read off the screenshots; at another size, those in a right-hand dock move with the right
edge and those on the canvas with its centre (:meth:`Walk.right`, :meth:`Walk.canvas`); dialogs are found by title with ``xdotool search`` and clicked
relative to their own geometry. Shortcuts are used wherever one exists (studio/actions.py,
training/hook.py, workspaces.py).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from desktop_walk_support import WIDTH, WalkFailed, add_size, drawn_share, first_cell
from desktop_walk_x import Walk, drive


def run_walk(w: Walk, epochs: int) -> None:
    def start() -> None:
        w.open_main_window()

    def gallery() -> None:
        w.key("ctrl+shift+n")
        w.wait_window(r"^New from template$", 60)

    def resnet18() -> None:
        w.pick_resnet18()

    def fit() -> None:
        w.focus_main()
        w.click(*w.canvas(600, 580))         # empty canvas, below the graph
        w.key("ctrl+0")
        time.sleep(1)

    def new() -> None:
        w.key("ctrl+n")
        w.wait_window(r"^Untitled ")
        time.sleep(1)

    def drag_layer() -> None:
        w.drag((56, 201), (120, 230), w.canvas(400, 380), w.canvas(590, 430))   # Layers > Core > Linear onto the canvas
        w.wait_window(r"^Untitled\* ")

    def wire() -> None:
        w.drag(w.canvas(538, 338), w.canvas(496, 453))       # Input's output port -> the Linear's input port
        w.drag(w.canvas(683, 453), w.canvas(800, 338))       # the Linear's output port -> Output's input port

    def network_fields() -> None:
        w.click(*w.canvas(900, 560))         # empty canvas: the Inspector shows the Network
        w.click(w.right(1311), 177)          # Input shape
        w.key("ctrl+a")
        w.type("64")
        w.key("Return")
        w.click(w.right(1311), 205)          # Input dtype: float16, then back to float32
        w.key("Down", "Return")
        w.click(w.right(1311), 205)
        w.key("Up", "Return")
        w.click(w.right(1306), 232)          # Classes: 9, then 10 (the digits' classes)
        w.key("ctrl+a")
        w.type("9")
        w.key("Return", "ctrl+a")
        w.type("10")
        w.key("Return")
        time.sleep(1)

    def train(epochs: int) -> Callable[[], None]:
        def run() -> None:
            w.focus_main()
            w.key("ctrl+t")
            x, y, _w, _h = w.wait_window(r"^Train$", 90)
            time.sleep(4)                    # the dataset preview
            w.click(x + 856, y + 105)        # epochs
            w.key("ctrl+a")
            w.type(str(epochs))
            w.key("Tab")
            time.sleep(2)
            w.shot(f"{w.step_no:02d}_train_dialog")
            w.click(x + 945, y + 696)        # Start training
            w.wait_gone(r"^Train$", 30)
            w.focus_main()
            time.sleep(8)                    # the worker starts and reports
        return run

    def pause() -> None:
        w.wait_run("the run trains", lambda status, rows, before: status == "running" and rows > before, 60)
        w.click(w.right(WIDTH - 450), 102)
        w.wait_run("Pause pauses", lambda status, rows, before: status == "running" and rows == before)
        rows = w.newest_run()[1]
        time.sleep(2)                        # a second look: paused, not between two windows of metrics
        if w.newest_run()[1] != rows or not w.workers():
            raise WalkFailed("Pause did not hold the run (its metrics went on, or its worker ended)")

    def resume() -> None:
        w.click(w.right(WIDTH - 450), 102)
        w.wait_run("Resume trains on", lambda status, rows, before: status == "running" and rows > before)

    def samples() -> None:
        w.shot(f"{w.step_no:02d}_samples_matrix")
        cell = first_cell(w.out / f"{w.step_no:02d}_samples_matrix.png", (w.width * 6 // 10, 140, w.width, w.height // 2 + 60))
        if cell is None:
            raise WalkFailed("no confusion matrix on the Train dashboard to click")
        w.click(*cell)                       # its cell true 0, predicted 0, as epochs of ~10 ms go by
        time.sleep(10)                       # the held checkpoint written, then re-evaluated on the CPU
        w.shot(f"{w.step_no:02d}_samples_probe")
        share = drawn_share(w.out / f"{w.step_no:02d}_samples_probe.png",    # the gallery's bottom (the dock is
                            (w.width * 62 // 100, w.height - 130, w.width - 20, w.height - 40))   # the right 40%)
        print(f"[walk]   clicked {cell}; the gallery's bottom is {share:.0%} drawn", flush=True)
        if share < 0.15:
            raise WalkFailed(f"a click on the live confusion matrix showed no samples ({share:.0%} of the gallery drawn)")

    def stop_run() -> None:
        w.click(w.right(WIDTH - 364), 102)
        w.wait_run("Stop stops", lambda status, rows, before: status == "stopped")

    def runs() -> None:
        w.focus_main()
        w.key("ctrl+shift+r")
        time.sleep(3)

    def export_onnx() -> None:
        w.key("ctrl+1")                      # Design
        time.sleep(1)
        w.key("ctrl+e")                      # Export > ONNX (the toolbar moved under a click at 768, 39)
        x, y, ww, hh = w.wait_window(r"(?i)export", 60)
        time.sleep(15)                       # export and its check against onnxruntime
        w.shot(f"{w.step_no:02d}_export_dialog")
        w.focus(r"(?i)export")
        w.key("Escape")
        w.wait_gone(r"(?i)export", 30)

    def theme() -> None:
        w.focus_main()
        w.click(238, 8)                      # View
        time.sleep(1)
        w.shot(f"{w.step_no:02d}_view_menu")
        w.click(287, 299)                    # Light Theme
        time.sleep(2)

    def quit_running() -> None:
        assert w.studio is not None
        w.focus_main()
        w.key("ctrl+q")
        answered: list[str] = []
        end = time.monotonic() + 60
        while w.studio.poll() is None and time.monotonic() < end:
            for _wid, name, rect in w.windows():
                if name in ("Unsaved changes", "A run is going") and rect[2] > 50:
                    time.sleep(0.8)
                    print(f"[walk]   {name!r} at {rect}", flush=True)
                    w.shot(f"{w.step_no:02d}_prompt_{len(answered) + 1}")
                    x, y, ww, hh = rect
                    if name == "Unsaved changes":
                        w.click(x + ww - 140, y + hh - 26)      # Discard
                    else:
                        w.click(x + ww - 152, y + hh - 26)      # Stop the run
                    answered.append(name)
                    time.sleep(1)
            time.sleep(0.3)
        if w.studio.poll() is None:
            raise WalkFailed(f"the studio did not quit (answered {answered})")
        if "A run is going" not in answered:
            raise WalkFailed(f"the studio quit without asking about the running run (answered {answered})")
        if w.studio.returncode != 0:
            raise WalkFailed(f"the studio exited with status {w.studio.returncode}")
        end = time.monotonic() + 20
        while (left := w.workers()) and time.monotonic() < end:
            time.sleep(0.5)
        if left:
            raise WalkFailed(f"'Stop the run' left its worker going: pids {left}")

    w.step("start", start)
    w.step("gallery", gallery)
    w.step("resnet18", resnet18)
    w.step("fit", fit)
    w.step("new_network", new)
    w.step("drag_linear", drag_layer)
    w.step("wire", wire)
    w.step("network_fields", network_fields)
    w.step("train_digits", train(epochs))
    w.step("pause", pause)
    w.step("resume", resume)
    w.step("samples", samples)
    w.step("stop", stop_run)
    w.step("runs", runs)
    w.step("export_onnx", export_onnx)
    w.step("theme", theme)
    w.step("train_again", train(epochs * 50))
    w.step("quit_during_run", quit_running, alive=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(Path(tempfile.gettempdir()) / "torch-studio-walk"),
                        help="folder for the screenshots and the studio's stderr (default: TMP/torch-studio-walk)")
    parser.add_argument("--epochs", type=int, default=20000,
                        help="epochs of each run: long enough to pause (the walk's network trains one in ~10 ms)")
    add_size(parser)
    args = parser.parse_args()
    return drive("desktop walk", Path(args.out), lambda walk: run_walk(walk, args.epochs), args.size)


if __name__ == "__main__":
    raise SystemExit(main())
