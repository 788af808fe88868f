"""The desktop walks' driver: :class:`Walk` (an Xvfb of its own, the studio started under it with scratch HOME
and XDG folders, real X events through xdotool, a screenshot and a check of the studio's stderr and process
after every step) and :func:`drive` (a walk's start, steps and end, as an exit status). The walks themselves:
``desktop_walk.py`` (issue 13's), ``desktop_walk_ship.py``, ``desktop_walk_canvas.py``,
``desktop_walk_experiments.py``."""

from __future__ import annotations

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

from desktop_walk_support import HEIGHT, WIDTH, WalkFailed, newest_run, wait_run

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
