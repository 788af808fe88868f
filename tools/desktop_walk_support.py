"""What the desktop walks share besides driving X: the screen size option and the run store's view of
the newest run (what a click on Pause, Resume or Stop must change)."""

from __future__ import annotations

import argparse
import contextlib
import re
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

WIDTH, HEIGHT = 1440, 900      # the default screen, and the one the walks' positions were read at


class WalkFailed(Exception):
    pass


def newest_run(scratch: Path) -> tuple[str, int]:
    """The newest run's status and its metric rows so far, read from the run store under the walk's
    scratch HOME ("none", 0 before the worker has made it)."""
    found = sorted(scratch.rglob("runs.sqlite"))
    if not found:
        return "none", 0
    with contextlib.closing(sqlite3.connect(f"file:{found[0]}?mode=ro", uri=True, timeout=10)) as db:
        try:
            row = db.execute("SELECT id, status FROM runs ORDER BY id DESC LIMIT 1").fetchone()
        except sqlite3.OperationalError:        # its tables not made yet
            return "none", 0
        if row is None:
            return "none", 0
        return row[1], db.execute("SELECT COUNT(*) FROM metrics WHERE run_id = ?", (row[0],)).fetchone()[0]


def wait_run(scratch: Path, what: str, ok: Callable[[str, int, int], bool], timeout: float = 30) -> None:
    """Wait until ``ok(status, rows, rows a second before)`` holds for the newest run, else fail saying ``what``."""
    end = time.monotonic() + timeout
    status, rows = newest_run(scratch)
    while True:
        time.sleep(1)
        status, before = (new := newest_run(scratch))[0], rows
        rows = new[1]
        if ok(status, rows, before):
            return
        if time.monotonic() > end:
            raise WalkFailed(f"{what}: after {timeout:.0f} s the run is {status}, {rows} metric rows")


def screen_size(text: str) -> tuple[int, int]:
    """``WIDTHxHEIGHT`` (e.g. 1280x800), for ``--size``."""
    m = re.fullmatch(r"(\d+)x(\d+)", text.strip())
    if not m or not (800 <= int(m[1]) <= 7680 and 600 <= int(m[2]) <= 4320):
        raise argparse.ArgumentTypeError(f"{text!r} is not a screen size WIDTHxHEIGHT from 800x600 to 7680x4320")
    return int(m[1]), int(m[2])


def add_size(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--size", type=screen_size, default=(WIDTH, HEIGHT), metavar="WxH",
                        help=f"the X screen and main window (default {WIDTH}x{HEIGHT}, where the positions were read)")


def drawn_share(png: Path, box: tuple[int, int, int, int]) -> float:
    """The share of ``box`` (left, top, right, bottom) of a screenshot that is not its commonest grey:
    a row of samples fills most of its area, an empty gallery none."""
    from PIL import Image

    with Image.open(png) as image:
        hist = image.convert("L").crop(box).histogram()
    background = max(range(256), key=hist.__getitem__)
    near = sum(hist[max(0, background - 6): background + 7])
    return 1 - near / sum(hist)


def first_cell(png: Path, box: tuple[int, int, int, int], rgb: tuple[int, int, int] = (0, 140, 70),
               tolerance: int = 24) -> tuple[int, int] | None:
    """The centre of the top-left patch of colour ``rgb`` in ``box`` of a screenshot (the confusion
    matrix's first diagonal cell, green, wherever the window's size put the matrix), or None."""
    from PIL import Image

    with Image.open(png) as image:
        pixels = image.convert("RGB").load()

    def near(x: int, y: int) -> bool:
        return all(abs(c - r) <= tolerance for c, r in zip(pixels[x, y], rgb, strict=True))

    left, top, right, bottom = box
    hits = [(x, y) for y in range(top, bottom) for x in range(left, right) if near(x, y)]
    if not hits:
        return None
    y0 = min(y for _, y in hits)
    x0 = min(x for x, y in hits if y < y0 + 4)
    x1, y1 = x0, y0
    while x1 + 1 < right and near(x1 + 1, y0 + 2):
        x1 += 1
    while y1 + 1 < bottom and near(x0 + 2, y1 + 1):
        y1 += 1
    return (x0 + x1) // 2, (y0 + y1) // 2
