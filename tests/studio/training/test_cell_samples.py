"""The samples of a confusion-matrix cell answer the newest click, for the matrix it was asked about:
re-evaluations are held on an event the test releases, so that an older one ends after a newer click,
or after the next epoch's matrix came (the Train dashboard's session; the Runs tab shares the rule)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from PySide6.QtCore import QPoint, Qt, QTimer

import studio.training.runs_dock as runs_dock
import studio.training.session as session_module
from studio.training.dashboard import TrainingDashboard
from studio.training.session import TrainingSession
from trainer.metrics.confusion_cells import Predictions
from trainer.protocol import events as ev

pytestmark = pytest.mark.qt
CLASSES = ["cat", "dog"]


class Held:
    """A stand-in for the checkpoint's re-evaluation on the CPU (what cannot run here fast): each call
    waits for its own release, then gives a matrix that names its checkpoint (its top-left count)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, threading.Event]] = []
        self.lock = threading.Lock()

    def __call__(self, spec: dict, path: str) -> Predictions:
        go = threading.Event()
        with self.lock:
            self.calls.append((path, go))
        go.wait(30)                        # a deadline: released by the test, or it gives up
        n = int(path.rsplit("-", 1)[1])    # ckpt-N: N samples of cat seen as cat
        true = np.array([0] * n + [1, 1, 0])
        pred = np.array([0] * n + [1, 0, 1])
        return Predictions(np.zeros((len(true), 1, 2, 2), np.uint8), np.arange(len(true)), true, pred, CLASSES)

    def release(self, i: int) -> None:
        self.calls[i][1].set()


@pytest.fixture
def held(monkeypatch):
    import studio.training.cell_samples as cell_samples

    fake = Held()
    monkeypatch.setattr(cell_samples, "predict_checkpoint", fake, raising=False)
    for called_before in (session_module, runs_dock):    # where it was called before CellSamples
        monkeypatch.setattr(called_before, "predict_checkpoint", fake, raising=False)
    yield fake
    for _, go in fake.calls:
        go.set()


@pytest.fixture
def session(qtbot, tmp_path):
    dash = TrainingDashboard(refresh_ms=0)
    qtbot.addWidget(dash)
    dash.resize(1280, 700)
    dash.show()
    s = TrainingSession(dash, f"sqlite:///{tmp_path / 'runs.sqlite'}", tmp_path)
    s.spec = {"model": {"graph": "net.graph.json"}}
    dash.begin_run("run", 100)
    yield s
    s.wait_tasks(30_000)


def _epoch(session: TrainingSession, epoch: int, cat: int) -> None:
    session.bridge.epoch_end.emit(ev.EpochEnd(epoch=epoch, step=10 * epoch, confusion=[[cat, 1], [1, 1]],
                                              classes=CLASSES))
    session.bridge.checkpoint.emit(ev.Checkpoint(kind="last", path=f"ckpt-{cat}", step=10 * epoch, epoch=epoch))


def _click(qtbot, session: TrainingSession, t: int, p: int) -> None:
    view = session.dashboard.confusion.matrix_view
    x, y = view.cell_center(t, p)
    qtbot.mouseClick(view, Qt.MouseButton.LeftButton, pos=QPoint(int(x), int(y)))


def _settle(qtbot, session: TrainingSession) -> None:
    """Every re-evaluation has ended and its result reached the GUI thread (a queued call runs after)."""
    assert session.wait_predictions(30_000)
    seen: list[int] = []
    QTimer.singleShot(0, lambda: seen.append(1))
    qtbot.waitUntil(lambda: seen == [1], timeout=10_000)


def test_the_newest_click_is_answered_not_the_one_whose_re_evaluation_ran(qtbot, session, held):
    _epoch(session, 1, 5)
    panel = session.dashboard.confusion
    _click(qtbot, session, 0, 0)                    # its checkpoint's re-evaluation starts, held
    qtbot.waitUntil(lambda: len(held.calls) == 1, timeout=10_000)
    _click(qtbot, session, 1, 0)                    # then the user clicks another cell
    assert panel.gallery.title().startswith("Loading the samples of true dog, predicted cat")
    held.release(0)
    qtbot.waitUntil(lambda: panel.gallery.title().startswith("true dog, predicted cat"), timeout=10_000)
    _settle(qtbot, session)
    assert panel.gallery.shown_indices() == [6]
    assert len(held.calls) == 1                     # one checkpoint, one re-evaluation


def test_an_older_epoch_s_samples_go_to_the_gallery_and_never_replace_the_newer_matrix(qtbot, session, held):
    _epoch(session, 1, 5)
    panel = session.dashboard.confusion
    _click(qtbot, session, 0, 0)
    qtbot.waitUntil(lambda: len(held.calls) == 1, timeout=10_000)
    _epoch(session, 2, 7)                           # the next epoch's matrix comes while epoch 1's is re-evaluated
    held.release(0)
    _settle(qtbot, session)
    assert panel.matrix_view.matrix().tolist() == [[7, 1], [1, 1]]      # still epoch 2's
    assert "epoch 2" in panel.caption.text()
    assert panel.gallery.shown_indices() == [0, 1, 2, 3, 4]             # epoch 1's cat-as-cat samples...
    assert panel.gallery.title().startswith("true cat, predicted cat (last checkpoint, epoch 1)")   # ...said so
    _click(qtbot, session, 0, 0)                    # a click on the matrix now answers from epoch 2's checkpoint
    qtbot.waitUntil(lambda: len(held.calls) == 2, timeout=10_000)
    assert held.calls[1][0] == "ckpt-7"
    held.release(1)
    qtbot.waitUntil(lambda: len(panel.gallery.shown_indices()) == 7, timeout=10_000)


def _holding(monkeypatch, session: TrainingSession) -> list[bool]:
    """The worker holds each epoch's checkpoint until asked (checkpoints.every_s): the run is going and
    takes the command; what cannot be timed here is when its answer comes, so the test sends it."""
    asked: list[bool] = []
    monkeypatch.setattr(session, "is_running", lambda: True)
    monkeypatch.setattr(session.bridge, "write_checkpoints", lambda: asked.append(True) or True)
    return asked


def _matrix_only(session: TrainingSession, epoch: int, cat: int) -> None:
    session.bridge.epoch_end.emit(ev.EpochEnd(epoch=epoch, step=10 * epoch, confusion=[[cat, 1], [1, 1]],
                                              classes=CLASSES))


def test_epochs_shorter_than_a_checkpoint_write_answer_a_click_from_the_write(qtbot, session, held, monkeypatch):
    """A click on epoch 1's matrix asks the worker for its held checkpoint; epochs 2 and 3 end before the
    command reaches it, so it writes epoch 3's. The click is answered from that (it was once forgotten at
    each new matrix: no samples while a run of short epochs, the sample digits', went on)."""
    asked = _holding(monkeypatch, session)
    panel = session.dashboard.confusion
    _matrix_only(session, 1, 5)
    _click(qtbot, session, 0, 0)
    assert asked == [True] and panel.gallery.title().startswith("Saving the run's checkpoint (epoch 1 or later)")
    _matrix_only(session, 2, 6)
    _matrix_only(session, 3, 7)
    session.bridge.checkpoint.emit(ev.Checkpoint(kind="last", path="ckpt-7", step=30, epoch=3))
    qtbot.waitUntil(lambda: len(held.calls) == 1, timeout=10_000)
    assert held.calls[0][0] == "ckpt-7"
    held.release(0)
    qtbot.waitUntil(lambda: len(panel.gallery.shown_indices()) == 7, timeout=10_000)
    assert panel.gallery.title().startswith("true cat, predicted cat (last checkpoint, epoch 3)")
    assert panel.matrix_view.matrix().tolist() == [[7, 1], [1, 1]] and "epoch 3" in panel.caption.text()


def test_a_click_waiting_for_a_write_the_run_never_made_is_told_so_at_its_end(qtbot, session, held, monkeypatch):
    _holding(monkeypatch, session)
    panel = session.dashboard.confusion
    _matrix_only(session, 1, 5)
    _click(qtbot, session, 0, 0)
    session.bridge.failed.emit(ev.Failed(kind="crash", message="out of memory"))
    session.bridge.exited.emit(1)                   # the worker's process ends after its last event
    assert panel.gallery.title() == "The run saved no checkpoint of epoch 1 or later to show its samples from."
    session.bridge.checkpoint.emit(ev.Checkpoint(kind="last", path="ckpt-9", step=90, epoch=9))
    assert held.calls == []                         # nothing waits any more


def test_a_click_on_the_newer_matrix_while_the_older_runs_is_answered_from_the_newer(qtbot, session, held):
    _epoch(session, 1, 5)
    panel = session.dashboard.confusion
    _click(qtbot, session, 0, 0)
    qtbot.waitUntil(lambda: len(held.calls) == 1, timeout=10_000)
    _epoch(session, 2, 7)
    _click(qtbot, session, 0, 0)                    # asked of epoch 2 while epoch 1's still runs
    held.release(0)
    qtbot.waitUntil(lambda: len(held.calls) == 2, timeout=10_000)      # then epoch 2's checkpoint is asked
    assert held.calls[1][0] == "ckpt-7" and panel.matrix_view.matrix().tolist() == [[7, 1], [1, 1]]
    held.release(1)
    qtbot.waitUntil(lambda: len(panel.gallery.shown_indices()) == 7, timeout=10_000)
    assert "epoch 2" in panel.gallery.title()


def test_in_runs_a_click_on_another_run_while_one_is_re_evaluated_is_answered(qtbot, tmp_path, held):
    """The Runs tab: run A's cell clicked (held), run B selected and its cell clicked: B's samples come, and
    A's result is not shown on B (B's click was once dropped, "Loading..." for good)."""
    from studio.training.runs_dock import RunsPanel
    from trainer.store.runs import RunStore

    store = RunStore(f"sqlite:///{tmp_path / 'runs.sqlite'}")
    for cat in (5, 7):
        rid = store.create_run(name=f"r{cat}", spec={}, graph={}, graph_hash=str(cat) * 64, device="cpu", params=1)
        path = tmp_path / f"ckpt-{cat}"
        path.write_bytes(b"weights")
        store.add_epoch_report(rid, 1, {"confusion": [[cat, 1], [1, 1]], "classes": CLASSES, "step": 10, "epoch": 1})
        store.add_checkpoint(rid, "last", str(path), 10, 1, None)
        store.finish(rid, "completed")
    panel = RunsPanel(store)
    qtbot.addWidget(panel)
    panel.resize(1280, 700)
    panel.show()
    panel.tabs.setCurrentWidget(panel.confusion)
    view = panel.confusion.matrix_view
    for rid in (1, 2):
        panel.select_ids([rid])
        qtbot.waitUntil(lambda rid=rid: f"run {rid}" in panel.confusion.caption.text(), timeout=10_000)
        x, y = view.cell_center(0, 0)
        qtbot.mouseClick(view, Qt.MouseButton.LeftButton, pos=QPoint(int(x), int(y)))
        qtbot.waitUntil(lambda: len(held.calls) >= 1, timeout=10_000)
    held.release(0)                                  # run 1's re-evaluation ends after run 2's click
    qtbot.waitUntil(lambda: len(held.calls) == 2, timeout=10_000)
    assert held.calls[1][0].endswith("ckpt-7") and view.matrix().tolist() == [[7, 1], [1, 1]]
    held.release(1)
    qtbot.waitUntil(lambda: len(panel.confusion.gallery.shown_indices()) == 7, timeout=10_000)
    assert "run 2" in panel.confusion.gallery.title()
    assert panel.wait_samples(30_000)
    store.close()
