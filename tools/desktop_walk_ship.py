"""The ship walk of issue 22, repeatable: a new user's first path through the real studio under a real
X server (Xvfb, 1440x900), driven only by real X events, then the README's predict command on what the
studio exported.

    .venv/bin/python tools/desktop_walk_ship.py [--out FOLDER]

Steps: open the Digits CNN template from the gallery, validate (F7), train one epoch from the Train
dialog, look at the dashboard, click a confusion-matrix cell (its samples), export ONNX with one click
(Ctrl+E), then ``torch-studio predict`` the exported file on the digits, in full and cut short by
``head`` (it must end quietly). Needs what tools/desktop_walk.py needs; it uses its Walk.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from desktop_walk_x import ROOT, Walk, WalkFailed, drive  # noqa: E402 - the tools folder is no package

DIGITS = ROOT / "assets" / "data" / "digits.npz"


def run_ship_walk(w: Walk) -> None:
    def start() -> None:
        w.open_main_window()

    def template() -> None:
        w.key("ctrl+shift+n")
        w.wait_window(r"^New from template$", 60)
        w.key("Return")                      # Digits CNN, the first card, is chosen
        w.wait_gone(r"^New from template$")
        w.wait_window(r"^Digits CNN")
        time.sleep(1.5)

    def validate() -> None:
        w.focus_main()
        w.key("F7")
        time.sleep(2)

    def train() -> None:
        w.focus_main()
        w.key("ctrl+t")
        x, y, _w, _h = w.wait_window(r"^Train$", 90)
        time.sleep(4)                        # the dataset preview and the memory prediction
        w.click(x + 856, y + 105)            # epochs
        w.key("ctrl+a")
        w.type("1")
        w.key("Tab")
        time.sleep(2)
        w.shot(f"{w.step_no:02d}_train_dialog")
        w.click(x + 945, y + 696)            # Start training
        w.wait_gone(r"^Train$", 30)
        w.focus_main()
        time.sleep(25)                       # the worker starts, trains one epoch, tests

    def confusion() -> None:
        w.click(1129, 300)                   # the matrix's cell (3, 3) in the Train workspace
        time.sleep(8)                        # the checkpoint is re-evaluated for the samples

    def export_onnx() -> None:
        w.focus_main()
        w.key("ctrl+1")                      # Design
        time.sleep(1)
        w.key("ctrl+e")                      # Export > ONNX: the newest run's best checkpoint
        w.wait_window(r"(?i)export", 60)
        time.sleep(20)                       # the export and its proof with onnxruntime
        w.shot(f"{w.step_no:02d}_export_dialog")
        w.focus(r"(?i)export")
        w.key("Escape")
        w.wait_gone(r"(?i)export", 30)

    def predict() -> None:
        found = sorted(w.scratch.rglob("*.onnx"))
        if not found:
            raise WalkFailed(f"no .onnx file under the studio's folders ({w.scratch})")
        env = {k: v for k, v in w.env().items() if k != "DISPLAY"}
        cmd = [w.python, "-m", "studio", "predict", str(found[-1]), str(DIGITS), "--top", "2"]
        full = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        (w.out / "predict.txt").write_text(full.stdout + full.stderr, encoding="utf-8")
        lines = full.stdout.splitlines()
        if full.returncode != 0 or len(lines) != 1797:
            raise WalkFailed(f"predict exited {full.returncode} with {len(lines)} lines: {full.stderr[-2000:]}")
        print(f"[walk]   predict: {lines[0]}", flush=True)
        cut = subprocess.run(f"{shlex.join(map(str, cmd))} | head -3", shell=True, cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=300)
        if "Traceback" in cut.stderr or "BrokenPipe" in cut.stderr or len(cut.stdout.splitlines()) != 3:
            raise WalkFailed(f"predict | head did not end quietly: {cut.stderr[-2000:]}")

    w.step("start", start)
    w.step("template", template)
    w.step("validate", validate)
    w.step("train_one_epoch", train)
    w.step("confusion_cell", confusion)
    w.step("export_onnx", export_onnx)
    w.step("predict", predict)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(Path(tempfile.gettempdir()) / "torch-studio-ship-walk"),
                        help="folder for the screenshots, the studio's stderr and predict's output")
    args = parser.parse_args()
    os.environ.pop("TORCH_STUDIO_DB", None)
    return drive("ship walk", Path(args.out), run_ship_walk)

if __name__ == "__main__":
    raise SystemExit(main())
