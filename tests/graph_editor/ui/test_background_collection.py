"""Python's garbage collector never runs on a thread the GUI starts: it would destroy the GUI's garbage Qt
objects there while the GUI thread uses them (a segfault)."""

from __future__ import annotations

import gc
import threading

import pytest

from graph_editor.ui.background import collection_paused, start_thread

pytestmark = pytest.mark.qt


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def _threads_collecting() -> tuple[list[bool], object]:
    on_gui: list[bool] = []

    def seen(phase: str, info: dict) -> None:
        if phase == "start":
            on_gui.append(threading.current_thread() is threading.main_thread())

    return on_gui, seen


def test_a_plain_thread_the_gui_starts_leaves_collection_to_the_gui_thread(qapp, qtbot):
    """The studio's torch warm-up imports torch on a plain thread as the window opens."""
    was_enabled = gc.isenabled()
    on_gui, seen = _threads_collecting()
    collected = threading.Event()
    outcome: list[bool] = []

    def work() -> None:
        for _ in range(100_000):
            _Cycle()
        outcome.append(collected.wait(30))

    gc.callbacks.append(seen)
    try:
        thread = threading.Thread(target=work, daemon=True)
        start_thread(thread)
        qtbot.waitUntil(lambda: on_gui.count(True) > 0, timeout=30_000)
        collected.set()
        thread.join(30)
        qtbot.waitUntil(lambda: gc.isenabled() == was_enabled, timeout=10_000)
    finally:
        gc.callbacks.remove(seen)
    assert outcome == [True]
    assert all(on_gui), f"{on_gui.count(False)} of {len(on_gui)} collections ran on the thread"


def test_a_bulk_build_on_the_gui_thread_is_not_interrupted_by_the_gui_collector(qapp, qtbot):
    """collection_paused() (a big graph's items being built) holds the GUI thread's collector too, even
    where the build lets events through."""
    on_gui, seen = _threads_collecting()
    gc.callbacks.append(seen)
    try:
        with collection_paused():
            for _ in range(20):
                for _ in range(5_000):
                    _Cycle()
                qtbot.wait(30)
            during = len(on_gui)
    finally:
        gc.callbacks.remove(seen)
    assert during == 0
