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
train on the digits, pause, resume, stop, Runs, export ONNX, switch theme, and quit during a second
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
import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from desktop_walk_support import HEIGHT, WIDTH, WalkFailed, add_size, newest_run, wait_run

ROOT = Path(__file__).resolve().parents[1]
BAD = re.compile(r"Traceback \(most recent call last\)|already deleted|Segmentation fault|Fatal Python error")


class Walk:
    def __init__(self, out: Path, python: str, size: tuple[int, int] = (WIDTH, HEIGHT)) -> None:
        self.out = out
        self.python = python
        self.width, self.height = size
        self.scratch = Path(tempfile.mkdtemp(prefix="studio-walk-"))
        self.display = ""
        self.xvfb: subprocess.Popen[bytes] | None = None
        self.studio: subprocess.Popen[str] | None = None
        self.stderr: list[str] = []
        self.step_no = 0
        self.main_id = ""

    # -- X server and studio -------------------------------------------------------------------
    def start_x(self) -> None:
        for n in range(90, 140):
            if not Path(f"/tmp/.X11-unix/X{n}").exists() and not Path(f"/tmp/.X{n}-lock").exists():
                break
        else:
            raise WalkFailed("no free X display number in :90-:139")
        self.display = f":{n}"
        self.xvfb = subprocess.Popen(["Xvfb", self.display, "-screen", "0", f"{self.width}x{self.height}x24", "-nolisten", "tcp"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        end = time.monotonic() + 15
        while not Path(f"/tmp/.X11-unix/X{n}").exists():
            if time.monotonic() > end or self.xvfb.poll() is not None:
                raise WalkFailed(f"Xvfb did not start on {self.display}")
            time.sleep(0.1)

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("TORCH_STUDIO_DB", None)
        home = self.scratch / "home"
        dirs = {"HOME": home, "XDG_CONFIG_HOME": home / ".config", "XDG_DATA_HOME": home / ".local/share",
                "XDG_CACHE_HOME": home / ".cache", "XDG_STATE_HOME": home / ".local/state",
                "XDG_RUNTIME_DIR": self.scratch / "runtime"}
        for key, path in dirs.items():
            path.mkdir(parents=True, exist_ok=True, mode=0o700)
            env[key] = str(path)
        env.update(DISPLAY=self.display, QT_QPA_PLATFORM="xcb", PYTHONUNBUFFERED="1")
        return env

    def start_studio(self) -> None:
        self.studio = subprocess.Popen([self.python, "-m", "studio"], cwd=ROOT, env=self.env(), text=True,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def open_main_window(self) -> None:
        """Start the studio and put its window at the walk's size in the corner, focused."""
        self.start_studio()
        self.wait_window(r"Torch Studio$", 60)
        self.main_id = next(i for i, n, _r in self.windows() if n.endswith("Torch Studio"))
        self.xdo("windowmove", self.main_id, 0, 0)
        self.xdo("windowsize", "--sync", self.main_id, self.width, self.height)
        self.focus_main()
        time.sleep(2)

    def _read_stderr(self) -> None:
        assert self.studio is not None and self.studio.stderr is not None
        with open(self.out / "studio-stderr.log", "w") as log:
            for line in self.studio.stderr:
                self.stderr.append(line)
                log.write(line)
                log.flush()

    def workers(self) -> list[int]:
        """Pids of processes started under the scratch folder (training workers)."""
        pids = []
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                if str(self.scratch).encode() in cmdline.read_bytes():
                    pids.append(int(cmdline.parent.name))
            except OSError:
                continue
        return pids

    def stop(self) -> None:
        for pid in self.workers():    # a walk that failed mid-run leaves its worker: end it
            with contextlib.suppress(OSError):
                os.kill(pid, 15)
        for proc in (self.studio, self.xvfb):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
        shutil.rmtree(self.scratch, ignore_errors=True)

    # -- the run, as its worker stored it -----------------------------------------------------------
    def newest_run(self) -> tuple[str, int]:
        return newest_run(self.scratch)

    def wait_run(self, what: str, ok: Callable[[str, int, int], bool], timeout: float = 30) -> None:
        wait_run(self.scratch, what, ok, timeout)

    # -- positions read at 1440x900, at this walk's size -------------------------------------------
    def right(self, x: int) -> int:
        """``x`` of something in a right-hand dock or the dashboard's right-aligned controls."""
        return x - (WIDTH - self.width)

    def canvas(self, x: int, y: int) -> tuple[int, int]:
        """A point on the canvas, whose view keeps its scene centred as the window shrinks."""
        return x - (WIDTH - self.width) // 2, y - (HEIGHT - self.height) // 2

    # -- X events ---------------------------------------------------------------------------------
    def xdo(self, *args: object) -> str:
        result = subprocess.run(["xdotool", *map(str, args)], env={**os.environ, "DISPLAY": self.display},
                                capture_output=True, text=True, timeout=30)
        return result.stdout.strip()

    def key(self, *keys: str) -> None:
        for k in keys:
            self.xdo("key", "--clearmodifiers", k)
            time.sleep(0.15)

    def type(self, text: str) -> None:
        self.xdo("type", "--delay", 40, text)

    def click(self, x: int, y: int, double: bool = False) -> None:
        self.xdo("mousemove", x, y)
        time.sleep(0.15)
        self.xdo("click", *(["--repeat", 2, "--delay", 80] if double else []), 1)
        time.sleep(0.3)

    def drag(self, *points: tuple[int, int]) -> None:
        """Press at the first point, move through the others in small steps, release at the last."""
        self.xdo("mousemove", *points[0])
        time.sleep(0.2)
        self.xdo("mousedown", 1)
        for (x0, y0), (x1, y1) in zip(points, points[1:], strict=False):
            for i in range(1, 9):
                self.xdo("mousemove", x0 + (x1 - x0) * i // 8, y0 + (y1 - y0) * i // 8)
                time.sleep(0.04)
        time.sleep(0.3)
        self.xdo("mouseup", 1)
        time.sleep(0.6)

    def windows(self) -> list[tuple[str, str, tuple[int, int, int, int]]]:
        """(id, title, (x, y, w, h)) of the studio's visible windows."""
        assert self.studio is not None
        found = []
        for wid in self.xdo("search", "--onlyvisible", "--pid", self.studio.pid).split():
            name = self.xdo("getwindowname", wid)
            geo = self.xdo("getwindowgeometry", "--shell", wid)
            vals = dict(line.split("=", 1) for line in geo.splitlines() if "=" in line)
            try:
                rect = (int(vals["X"]), int(vals["Y"]), int(vals["WIDTH"]), int(vals["HEIGHT"]))
            except (KeyError, ValueError):
                continue
            found.append((wid, name, rect))
        return found

    def wait_window(self, title: str, timeout: float = 30) -> tuple[int, int, int, int]:
        """The geometry of the studio's window whose title matches ``title`` (a regex), once shown."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.check_alive()
            for _wid, name, rect in self.windows():
                if re.search(title, name) and rect[2] > 50:
                    time.sleep(0.8)   # let it lay out and paint
                    return rect
            time.sleep(0.3)
        raise WalkFailed(f"no window titled /{title}/ within {timeout:.0f} s "
                         f"(windows: {[n for _i, n, _r in self.windows()]})")

    def wait_gone(self, title: str, timeout: float = 30) -> None:
        end = time.monotonic() + timeout
        while any(re.search(title, n) for _i, n, _r in self.windows()):
            if time.monotonic() > end:
                raise WalkFailed(f"the window /{title}/ is still open after {timeout:.0f} s")
            time.sleep(0.3)

    def focus(self, title: str) -> None:
        """Give the keyboard focus to the studio's window titled ``title`` (no window manager does)."""
        wid = next(i for i, n, _r in self.windows() if re.search(title, n))
        self.xdo("windowfocus", "--sync", wid)
        time.sleep(0.2)

    def focus_main(self) -> None:
        """Without a window manager a closed dialog leaves the focus nowhere: give it back."""
        self.xdo("windowfocus", "--sync", self.main_id)
        time.sleep(0.2)

    def pick_resnet18(self) -> None:
        """In the open template gallery, choose the ResNet-18 card and wait for its graph to show."""
        x, y, _w, _h = self.wait_window(r"^New from template$")
        self.click(x + 507, y + 509)         # the ResNet-18 card: second row, middle column
        self.key("Return")
        self.wait_gone(r"^New from template$")
        self.wait_window(r"^ResNet-18 ")
        time.sleep(1.5)

    # -- checks and steps -------------------------------------------------------------------------
    def check_alive(self) -> None:
        assert self.studio is not None
        if self.studio.poll() is not None:
            raise WalkFailed(f"the studio exited with status {self.studio.returncode}")

    def check_stderr(self) -> None:
        text = "".join(self.stderr)
        if m := BAD.search(text):
            start = max(0, text.rfind("\n", 0, max(0, m.start() - 1)))
            raise WalkFailed(f"the studio's stderr has {m.group(0)!r}:\n{text[start:start + 3000]}")

    def shot(self, name: str) -> None:
        subprocess.run(["import", "-display", self.display, "-window", "root", str(self.out / f"{name}.png")],
                       check=False, timeout=60)

    def step(self, name: str, action: Callable[[], None], alive: bool = True) -> None:
        self.step_no += 1
        label = f"{self.step_no:02d}_{name}"
        print(f"[walk] {label}", flush=True)
        try:
            action()
            time.sleep(0.5)
            self.check_stderr()
            if alive:
                self.check_alive()
        except WalkFailed as exc:
            self.shot(label + "_FAILED")
            raise WalkFailed(f"step {label}: {exc}") from None
        self.shot(label)


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
    parser.add_argument("--epochs", type=int, default=300, help="epochs of each run (long enough to pause)")
    add_size(parser)
    args = parser.parse_args()
    return drive("desktop walk", Path(args.out), lambda walk: run_walk(walk, args.epochs), args.size)


def drive(name: str, out: Path, steps: Callable[[Walk], None], size: tuple[int, int] = (WIDTH, HEIGHT)) -> int:
    """Start an X server at ``size``, run ``steps`` on a fresh :class:`Walk` writing to ``out``, stop everything;
    the exit status (0 passed, 1 a step failed, 2 a tool is missing), with one line saying which."""
    missing = [t for t in ("Xvfb", "xdotool", "import") if shutil.which(t) is None]
    if missing:
        print(f"{name}: missing {', '.join(missing)}: apt-get install -y xvfb xdotool imagemagick", file=sys.stderr)
        return 2
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    walk = Walk(out, sys.executable, size)
    try:
        walk.start_x()
        steps(walk)
    except WalkFailed as exc:
        print(f"{name} FAILED at {exc}", file=sys.stderr)
        return 1
    finally:
        walk.stop()
    print(f"{name} passed: {walk.step_no} steps at {walk.width}x{walk.height}, screenshots in {out}")
    return 0

if __name__ == "__main__":
    raise SystemExit(main())
