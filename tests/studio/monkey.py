"""A seeded monkey for the main window: thousands of random real input events (clicks, double
clicks, drags, keys, wheel turns, Tab search, menu commands) on a window with a template open.

Run as a process (``python -m tests.studio.monkey --seed 1 --seconds 20``) so that a segfault is
a failed run with the seed and the last events printed, not a dead test session. Any Python
exception (``sys.excepthook``) or Qt warning about a deleted object makes it exit 1; it prints
one JSON line with what it did. Questions are answered by :class:`MonkeyPrompts` (cancel, no,
a template), so no modal dialog blocks; commands that open the Train or export dialogs, quit, or
show a context menu (a blocking ``QMenu.exec``) are left out.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
import traceback
from collections import deque
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QEvent, QPoint, QPointF, Qt, QTimer, QtMsgType, qInstallMessageHandler  # noqa: E402
from PySide6.QtGui import QAction, QWheelEvent  # noqa: E402
from PySide6.QtTest import QTest  # noqa: E402
from PySide6.QtWidgets import QAbstractButton, QApplication, QMenuBar, QToolButton, QWidget  # noqa: E402

TEMPLATE = "lenet5"
UNSAFE_ACTIONS = {"quit", "train"}  # Quit, the Train dialog; and every action whose text says export
UNSAFE_WORDS = ("export", "quit")
Key = Qt.Key
CTRL, SHIFT, NONE = Qt.KeyboardModifier.ControlModifier, Qt.KeyboardModifier.ShiftModifier, Qt.KeyboardModifier.NoModifier
KEYS = ([(k, NONE) for k in (Key.Key_Tab, Key.Key_Return, Key.Key_Escape, Key.Key_Delete, Key.Key_Backspace,
                             Key.Key_Left, Key.Key_Right, Key.Key_Up, Key.Key_Down, Key.Key_Space, Key.Key_PageUp,
                             Key.Key_F7, Key.Key_Home, Key.Key_End)]
        + [(k, NONE) for k in (Key.Key_1, Key.Key_2, Key.Key_0, Key.Key_5, Key.Key_A, Key.Key_X, Key.Key_Minus,
                               Key.Key_Comma, Key.Key_Period)]
        + [(k, CTRL) for k in (Key.Key_Z, Key.Key_Y, Key.Key_C, Key.Key_V, Key.Key_D, Key.Key_A, Key.Key_X, Key.Key_L,
                               Key.Key_0, Key.Key_S, Key.Key_N, Key.Key_B, Key.Key_G)]
        + [(Key.Key_Z, CTRL | SHIFT)])
SEARCH_WORDS = ("conv", "relu", "lin", "batch", "drop", "pool", "xyz", "")


class MonkeyPrompts:
    """Answers every question without a dialog: cancel, no, nothing chosen; the gallery gives a template."""

    def __init__(self, templates: Path) -> None:
        self.templates = templates
        self.asked: list[str] = []

    def _note(self, name: str) -> None:
        self.asked.append(name)

    def save_changes(self, parent, document):
        self._note("save_changes")
        return "discard"

    def open_path(self, parent, directory):
        self._note("open_path")

    def save_path(self, parent, suggested):
        self._note("save_path")

    def error(self, parent, title, message):
        self._note("error")

    def recover(self, parent, description):
        self._note("recover")
        return False

    def template(self, parent):
        self._note("template")
        return self.templates / f"{TEMPLATE}.graph.json"

    def import_module(self, parent):
        self._note("import_module")

    def block_name(self, parent, suggested):
        self._note("block_name")

    def running_run(self, parent):
        self._note("running_run")
        return "cancel"

    def delete_runs(self, parent, description):
        self._note("delete_runs")
        return False

    def number(self, parent, title, label, value, low, high, decimals=0):
        self._note("number")


class Monkey:
    def __init__(self, window, seed: int) -> None:
        self.window = window
        self.rng = random.Random(seed)
        self.recent: deque[str] = deque(maxlen=25)
        self.counts: dict[str, int] = {}

    # ----------------------------------------------------------------- targets
    def widgets(self) -> list[QWidget]:
        popup = QApplication.activePopupWidget()
        if popup is not None:
            return [popup]
        found = []
        for w in self.window.findChildren(QWidget):
            if not w.isVisible() or w.width() < 4 or w.height() < 4 or _in_menubar(w):
                continue
            if isinstance(w, QToolButton) and w.defaultAction() is not None and not _safe(w.defaultAction()):
                continue
            if isinstance(w, QAbstractButton) and any(word in w.text().lower() for word in UNSAFE_WORDS):
                continue
            found.append(w)
        return found

    def target(self) -> QWidget:
        if self.rng.random() < 0.35 and QApplication.activePopupWidget() is None:
            return self.window.canvas.viewport()
        return self.rng.choice(self.widgets() or [self.window.canvas.viewport()])

    def point(self, w: QWidget) -> QPoint:
        return QPoint(self.rng.randrange(max(1, w.width())), self.rng.randrange(max(1, w.height())))

    # ----------------------------------------------------------------- events
    def step(self) -> None:
        kind = self.rng.choices(("click", "double", "drag", "key", "wheel", "search", "action", "type"),
                                (30, 6, 14, 24, 8, 4, 6, 8))[0]
        self.counts[kind] = self.counts.get(kind, 0) + 1
        getattr(self, f"_{kind}")()

    def _note(self, text: str) -> None:
        self.recent.append(text)

    def _click(self) -> None:
        w = self.target()
        p = self.point(w)
        self._note(f"click {_name(w)} at {p.x()},{p.y()}")
        QTest.mouseClick(w, Qt.MouseButton.LeftButton, self._mods(), p)

    def _double(self) -> None:
        w = self.target()
        p = self.point(w)
        self._note(f"double-click {_name(w)} at {p.x()},{p.y()}")
        QTest.mouseDClick(w, Qt.MouseButton.LeftButton, NONE, p)

    def _drag(self) -> None:
        w = self.target()
        a, b = self.point(w), self.point(w)
        button = Qt.MouseButton.MiddleButton if self.rng.random() < 0.15 else Qt.MouseButton.LeftButton
        self._note(f"drag {_name(w)} {a.x()},{a.y()} -> {b.x()},{b.y()}")
        QTest.mousePress(w, button, self._mods(), a)
        for i in range(1, 5):
            QTest.mouseMove(w, a + (b - a) * i / 4)
        QTest.mouseRelease(w, button, NONE, b)

    def _key(self) -> None:
        key, mods = self.rng.choice(KEYS)
        w = QApplication.focusWidget() or self.window.canvas.viewport()
        self._note(f"key {mods.name if hasattr(mods, 'name') else mods}+{key.name} on {_name(w)}")
        QTest.keyClick(w, key, mods)

    def _type(self) -> None:
        w = QApplication.focusWidget() or self.target()
        text = self.rng.choice(("12", "3, 3", "0", "-1", "1e-3", "abc", "64", "3x32x32", " "))
        self._note(f"type {text!r} + Enter on {_name(w)}")
        QTest.keyClicks(w, text)
        QTest.keyClick(w, Key.Key_Return)

    def _wheel(self) -> None:
        w = self.target()
        p = QPointF(self.point(w))
        delta = self.rng.choice((120, -120, 240, -360))
        mods = CTRL if self.rng.random() < 0.3 else NONE
        self._note(f"wheel {delta} on {_name(w)}")
        event = QWheelEvent(p, QPointF(w.mapToGlobal(p.toPoint())), QPoint(), QPoint(0, delta),
                            Qt.MouseButton.NoButton, mods, Qt.ScrollPhase.NoScrollPhase, False)
        QApplication.sendEvent(w, event)

    def _search(self) -> None:
        viewport = self.window.canvas.viewport()
        word = self.rng.choice(SEARCH_WORDS)
        self._note(f"Tab search {word!r}")
        self.window.canvas.setFocus()
        QTest.keyClick(viewport, Key.Key_Tab)
        QApplication.processEvents()
        popup = QApplication.focusWidget() or viewport
        QTest.keyClicks(popup, word)
        QTest.keyClick(popup, self.rng.choice((Key.Key_Return, Key.Key_Escape, Key.Key_Down)))

    def _action(self) -> None:
        actions = [a for a in self.window.findChildren(QAction) if _safe(a) and a.isEnabled()]
        if not actions:
            return
        action = self.rng.choice(actions)
        self._note(f"action {action.objectName() or action.text()}")
        action.trigger()

    def _mods(self) -> Qt.KeyboardModifier:
        r = self.rng.random()
        return CTRL if r < 0.1 else SHIFT if r < 0.15 else NONE


def _safe(action: QAction) -> bool:
    name = action.objectName().removeprefix("action_")
    text = action.text().replace("&", "").lower()
    return (bool(text) and not action.isSeparator() and action.menu() is None and name not in UNSAFE_ACTIONS
            and not name.startswith("export") and not any(word in text for word in UNSAFE_WORDS))


def _in_menubar(w: QWidget) -> bool:
    while w is not None:
        if isinstance(w, QMenuBar):
            return True
        w = w.parentWidget()
    return False


def _name(w: QWidget) -> str:
    return f"{type(w).__name__}({w.objectName()})" if w.objectName() else type(w).__name__


def run(seed: int, seconds: float, max_events: int) -> int:
    from studio.app import build
    from studio.resources import TEMPLATES
    from studio.settings import StudioSettings

    problems: list[str] = []

    def on_exception(kind, value, tb) -> None:
        problems.append("".join(traceback.format_exception(kind, value, tb)))

    def on_message(mode, context, message: str) -> None:
        if "deleted" in message or mode in (QtMsgType.QtCriticalMsg, QtMsgType.QtFatalMsg):
            problems.append(f"Qt: {message}")
        if mode == QtMsgType.QtFatalMsg:   # Qt aborts when this returns: said here, or the abort is mute
            print(f"Qt fatal: {message}", file=sys.stderr, flush=True)

    sys.excepthook = on_exception
    qInstallMessageHandler(on_message)
    app = QApplication.instance() or QApplication([])
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        prompts = MonkeyPrompts(TEMPLATES)
        window = build(app, StudioSettings.at(folder / "settings.ini"), prompts, folder / "recovery",
                       autosave_ms=500, runs_db=f"sqlite:///{folder / 'runs.sqlite'}", blocks_dir=folder / "blocks")
        window.resize(1280, 800)
        # New Sweep asks in its own dialog (run modally): answered "cancel", as MonkeyPrompts answers
        window.experiments.ask = lambda _graph: None
        window.show()
        window.activateWindow()
        # A copy: the monkey's Ctrl+S saves the open file, and must never write into assets/.
        graph_file = folder / f"{TEMPLATE}.graph.json"
        shutil.copyfile(TEMPLATES / f"{TEMPLATE}.graph.json", graph_file)
        assert window.files.open(graph_file)
        monkey = Monkey(window, seed)
        start, events = time.monotonic(), 0
        try:
            while events < max_events and time.monotonic() - start < seconds and not problems:
                if not window.isVisible():
                    window.show()
                if len(window.controller.graph) < 4 and monkey.rng.random() < 0.05:  # New emptied it
                    shutil.copyfile(TEMPLATES / f"{TEMPLATE}.graph.json", graph_file)
                    window.files.open(graph_file)
                monkey.step()
                events += 1
                if events % 5 == 0:
                    QApplication.processEvents()
                    QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
            QApplication.processEvents()
        except Exception:  # an exception out of a QTest call: the widget handlers raised it
            problems.append(traceback.format_exc())
        report = {"seed": seed, "events": events, "seconds": round(time.monotonic() - start, 1),
                  "kinds": monkey.counts, "nodes": len(window.controller.graph),
                  "undo_steps": window.controller.undo_stack.count(), "asked": len(prompts.asked),
                  "problems": problems[:3], "last_events": list(monkey.recent) if problems else []}
        print(json.dumps(report), flush=True)
        window.document.undo_stack.setClean()
        window.s.recovery.release()
        window.hide()
        # Quit as the studio quits (aboutToQuit: the background tasks still running are waited for); a
        # QThread still running as the interpreter ends aborts the process (CI: exit -6 after a clean report).
        QTimer.singleShot(0, app.quit)
        app.exec()
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--events", type=int, default=100_000)
    args = parser.parse_args(argv)
    return run(args.seed, args.seconds, args.events)


if __name__ == "__main__":
    sys.exit(main())
