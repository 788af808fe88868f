"""The runs dock over a real SQLite run store (rows written through the trainer's RunStore)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from studio.training.plot_theme import DARK, LIGHT, apply_plot_theme
from studio.training.run_history import delete_run, describe_runs, run_rows
from studio.training.runs_dock import COLUMNS, RunsPanel
from trainer.store.runs import RunStore

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.qt


def _graph() -> dict:
    return json.loads((ROOT / "assets/templates/digits_cnn.graph.json").read_text())


@pytest.fixture
def store(tmp_path):
    s = RunStore(f"sqlite:///{tmp_path / 'runs.sqlite'}")
    g1 = _graph()
    g2 = copy.deepcopy(g1)
    g2["nodes"].append({"id": "extra", "type": "Dropout", "params": {"p": 0.5}, "position": [0, 0]})
    for i, (name, graph, acc) in enumerate((("alpha", g1, 0.91), ("beta", g2, 0.97), ("gamma", g1, None))):
        run_dir = tmp_path / f"run-{i}"
        (run_dir / "checkpoints").mkdir(parents=True)
        ckpt = run_dir / "checkpoints" / "best.safetensors"
        ckpt.write_bytes(b"x")
        rid = s.create_run(name=name, spec={"data": {"dataset": "digits"}}, graph=graph, graph_hash=f"{i:064d}",
                           device="cpu", params=1000 * (i + 1), run_dir=str(run_dir))
        s.add_metrics(rid, [(st, "val/accuracy", 0.5 + 0.1 * st + 0.01 * i) for st in range(1, 4)])
        s.add_checkpoint(rid, "best", str(ckpt), 3, 1, acc)
        if acc is not None:
            s.update_run(rid, best_metric="val_accuracy", best_value=acc)
            s.finish(rid, "completed")
        else:
            s.finish(rid, "failed", error_kind="nan", error="the loss became NaN at step 3")
    yield s
    s.close()


class _Answers:
    """The window's prompts as the runs dock uses them: answers delete_runs from a list."""

    def __init__(self, *answers: bool) -> None:
        self.answers = list(answers)
        self.asked: list[str] = []

    def delete_runs(self, parent, description):
        self.asked.append(description)
        return self.answers.pop(0)


def _panel(qtbot, store, **kw) -> RunsPanel:
    panel = RunsPanel(store, **kw)
    qtbot.addWidget(panel)
    panel.resize(900, 600)
    panel.show()
    return panel


def _column(panel: RunsPanel, name: str) -> list[str]:
    col = COLUMNS.index(name)
    return [panel.proxy.index(r, col).data() for r in range(panel.proxy.rowCount())]


def test_lists_filters_and_sorts(qtbot, store):
    panel = _panel(qtbot, store)
    assert _column(panel, "name") == ["gamma", "beta", "alpha"]  # newest first
    assert _column(panel, "status") == ["failed", "completed", "completed"]
    assert _column(panel, "best val acc") == ["0.8200", "0.8100", "0.8000"]  # highest val/accuracy stored
    panel.table.sortByColumn(COLUMNS.index("params"), Qt.SortOrder.AscendingOrder)
    assert _column(panel, "name") == ["alpha", "beta", "gamma"]
    panel.table.sortByColumn(COLUMNS.index("best val acc"), Qt.SortOrder.DescendingOrder)
    assert _column(panel, "name") == ["gamma", "beta", "alpha"]
    panel.filter.setText("FAIL")
    assert _column(panel, "name") == ["gamma"]
    panel.select_ids([3])
    assert "the loss became NaN" in panel.details.text()


def test_overlay_and_diff_of_two_runs(qtbot, store):
    panel = _panel(qtbot, store)
    panel.select_ids([1, 2])
    panel.overlay_selected()
    assert panel.plot.curve_names() == ["run 1 alpha", "run 2 beta"]
    assert panel.plot.buffer("run 2 beta").y.tolist() == pytest.approx([0.61, 0.71, 0.81])
    panel.diff_selected()
    text = panel.diff_text.toPlainText()
    assert text.startswith("From run 1 to run 2:") and "+ extra (Dropout)" in text
    panel.select_ids([1])
    panel.diff_selected()
    assert "exactly two" in panel.diff_text.toPlainText()


def test_open_graph_goes_through_the_shell_callback(qtbot, store):
    opened = []
    panel = _panel(qtbot, store, open_graph=lambda g, title: opened.append((g, title)))
    panel.select_ids([2])
    panel.open_selected()
    assert opened[0][1] == "run 2 beta" and any(n["id"] == "extra" for n in opened[0][0]["nodes"])


def test_delete_asks_through_the_prompts_then_removes_rows_and_files(qtbot, store):
    prompts = _Answers(True)
    panel = _panel(qtbot, store, prompts=prompts)
    run_dir = Path(store.run(1).run_dir)
    panel.select_ids([1, 3])
    assert panel.delete_selected() == [1, 3]
    assert prompts.asked == ['2 runs: 1 "alpha" and 3 "gamma"']
    assert not run_dir.exists() and panel.row(1) is None and panel.row(3) is None
    assert [r.id for r in run_rows(store)] == [2] and store.metrics(1) == [] and store.checkpoints(3) == []
    assert Path(store.run(2).run_dir).exists()


def test_delete_refused_deletes_nothing(qtbot, store):
    prompts = _Answers(False)
    panel = _panel(qtbot, store, prompts=prompts)
    panel.select_ids([2])
    assert panel.delete_selected() == []
    assert prompts.asked == ['run 2 "beta"']
    assert Path(store.run(2).run_dir).exists() and panel.row(2) is not None
    assert len(store.metrics(2)) == 3 and len(store.checkpoints(2)) == 1


def test_describe_runs_names_ids_and_count():
    assert describe_runs([(4, "")]) == "run 4"
    many = describe_runs([(i, f"r{i}") for i in range(1, 12)], most=3)
    assert many == '11 runs: 1 "r1", 2 "r2", 3 "r3" and 8 more'


def test_delete_run_removes_its_folder_and_stray_checkpoints_and_keeps_outside_exports(store, tmp_path):
    run_dir = Path(store.run(1).run_dir)
    (run_dir / "model.onnx").write_bytes(b"onnx")
    store.add_artifact(1, "onnx", str(run_dir / "model.onnx"))
    outside = tmp_path / "exports" / "model.onnx"
    outside.parent.mkdir()
    outside.write_bytes(b"onnx")
    store.add_artifact(1, "onnx", str(outside))
    stray = tmp_path / "elsewhere" / "last.safetensors"
    stray.parent.mkdir()
    stray.write_bytes(b"x")
    stray.with_suffix(".json").write_text("{}")
    store.add_checkpoint(1, "last", str(stray), 3, 1, None)
    removed = delete_run(store, 1)
    assert set(removed) == {str(run_dir), str(stray), str(stray.with_suffix(".json"))}
    assert not run_dir.exists() and not stray.exists() and outside.exists()
    assert store.artifacts(1) == [] and store.checkpoints(1) == []


def test_delete_run_with_its_folder_already_gone(store):
    run_dir = Path(store.run(2).run_dir)
    for f in sorted(run_dir.rglob("*"), reverse=True):
        f.unlink() if f.is_file() else f.rmdir()
    run_dir.rmdir()
    assert delete_run(store, 2) == []
    assert [r.id for r in run_rows(store)] == [1, 3]


def test_overlay_plot_follows_the_theme(qtbot, store):
    panel = _panel(qtbot, store)
    panel.select_ids([1, 2])
    panel.overlay_selected()
    assert panel.plot.theme is LIGHT and panel.plot.curve_color("run 1 alpha") == "#0072b2"
    status = panel.proxy.index(2, COLUMNS.index("status"))   # run 1, completed
    assert status.data(Qt.ItemDataRole.ForegroundRole).name() == "#1b7a3d"
    assert apply_plot_theme(panel, "dark") == 4     # the panel (status colours), its plot, the confusion views
    assert status.data(Qt.ItemDataRole.ForegroundRole).name() == "#5cc98a"
    assert panel.plot.theme is DARK and panel.plot.backgroundBrush().color().name() == DARK.background
    assert panel.plot.curve_color("run 1 alpha") == DARK.curve("#0072B2").lower()
    panel.select_ids([2, 3])
    panel.overlay_selected()   # curves drawn after the switch are in the dark colours too
    assert panel.plot.curve_color("run 2 beta") == DARK.curve("#0072B2").lower()


def test_a_running_run_is_not_deleted(store):
    rid = store.create_run(name="live", spec={}, graph=_graph(), graph_hash="0" * 64, device="cpu", params=1)
    with pytest.raises(ValueError, match="still running"):
        delete_run(store, rid)


@pytest.mark.process
def test_a_past_runs_confusion_matrix_and_the_samples_of_a_cell(qtbot, tmp_path):
    """Two epochs; a min_delta no epoch can beat makes epoch 1 the best checkpoint and epoch 2 the last.
    The matrix shown and the samples a click brings are the same epoch's (the click once re-evaluated
    the best checkpoint, epoch 1, under epoch 2's matrix and swapped the matrix)."""
    import subprocess
    import sys

    import numpy as np
    from PySide6.QtCore import QPoint

    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"name": "past", "model": {"graph": str(ROOT / "assets/templates/digits_cnn.graph.json")},
                                "device": "cpu", "train": {"epochs": 2}, "early_stopping": {"min_delta": 0.9}}))
    db = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    done = subprocess.run([sys.executable, "-m", "trainer", "run", str(spec), "--db", db], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    store = RunStore(db)
    assert {(c.kind, c.epoch) for c in store.checkpoints(1)} >= {("best", 1), ("last", 2)}
    panel = _panel(qtbot, store)
    panel.select_ids([1])
    stored = np.asarray(store.epoch_reports(1)[-1]["confusion"])
    view = panel.confusion.matrix_view
    assert np.array_equal(view.matrix(), stored)
    assert panel.confusion.caption.text().endswith("run 1, epoch 2, last checkpoint)")
    t = int(np.argmax(np.diag(stored)))
    panel.tabs.setCurrentWidget(panel.confusion)
    x, y = view.cell_center(t, t)
    qtbot.mouseClick(view, Qt.MouseButton.LeftButton, pos=QPoint(int(x), int(y)))
    assert panel.wait_samples()
    qtbot.waitUntil(lambda: len(panel.confusion.gallery.shown_indices()) > 0, timeout=60_000)
    # The last checkpoint is epoch 2's: re-evaluated on the CPU it gives the stored matrix again.
    assert np.array_equal(view.matrix(), stored)
    assert panel.confusion.gallery.title() == (f"true {t}, predicted {t} (run 1, last checkpoint, epoch 2): "
                                               f"{stored[t, t]} samples")
    qtbot.wait(100)                                           # the gallery's tiles laid out
    panel.grab().save(str(tmp_path / "runs_confusion.png"))   # painted: an attribute once hid QWidget.metric()
    store.close()


def test_the_confusion_tab_follows_a_running_run(qtbot, store):
    import numpy as np

    rid = store.create_run(name="live", spec={}, graph=_graph(), graph_hash="9" * 64, device="cpu", params=1)
    store.add_epoch_report(rid, 1, {"confusion": [[3, 1], [2, 4]], "classes": ["cat", "dog"]})
    store.update_run(rid, epoch=1)
    panel = _panel(qtbot, store)
    panel.select_ids([rid])
    assert panel.confusion.caption.text().endswith(f"run {rid}, epoch 1)")
    store.add_epoch_report(rid, 2, {"confusion": [[4, 0], [1, 5]], "classes": ["cat", "dog"]})
    store.update_run(rid, epoch=2)
    panel.refresh()                                   # the dock's poll
    assert panel.confusion.caption.text().endswith(f"run {rid}, epoch 2)")
    assert np.array_equal(panel.confusion.matrix_view.matrix(), [[4, 0], [1, 5]])
    assert panel.confusion.metrics.item(0, 0).text() == "cat"


def test_details_follow_the_selected_run_live_and_show_its_recipe(qtbot, store):
    spec = {"optim": {"name": "sgd", "lr": 0.05}, "train": {"batch_size": 32, "epochs": 7},
            "precision": {"dtype": "bf16", "compile": "default"}, "data": {"dataset": "digits"}}
    rid = store.create_run(name="live", spec=spec, graph=_graph(), graph_hash="8" * 64, device="cpu", params=1)
    store.update_run(rid, epoch=1, step=10)
    panel = _panel(qtbot, store)
    panel.select_ids([rid])
    panel.tabs.setCurrentIndex(2)
    text = panel.details.text()
    assert "at epoch 1, step 10" in text
    assert "Recipe: sgd, lr 0.05, batch 32, 7 epochs, bf16, compile default, dataset digits." in text
    store.update_run(rid, epoch=2, step=20)
    panel.refresh()                                   # the dock's poll: no click needed
    assert "at epoch 2, step 20" in panel.details.text()


def test_a_resumed_runs_duration_and_its_learning_rate_set_by_hand(qtbot, store):
    """A run stopped at 40 s of training, resumed an hour later, ended at 70 s on its clock (the worker's
    summary): its duration is 70 s, not the hour between; its details say the schedule and the rate set
    by hand mid-run (the lr/set rows the worker writes) as well as the rate it ended at."""
    from datetime import timedelta

    spec = {"optim": {"name": "sgd", "lr": 0.05}, "schedule": {"name": "cosine"}}
    rid = store.create_run(name="resumed", spec=spec, graph=_graph(), graph_hash="7" * 64, device="cpu", params=1)
    store.add_metrics(rid, [(10, "lr", 0.05), (20, "lr", 0.04), (20, "lr/set", 0.0123), (30, "lr", 0.0123),
                            (10, "time", 12.0), (30, "time", 69.5)])
    run = store.run(rid)
    store.finish(rid, "completed", summary={"seconds": 70.0})
    store.update_run(rid, ended_at=run.started_at + timedelta(hours=1, seconds=70))
    panel = _panel(qtbot, store)
    assert dict(zip(_column(panel, "name"), _column(panel, "duration"), strict=True))["resumed"] == "1:10"
    panel.select_ids([rid])
    text = panel.details.text()
    assert ", 1:10." in text and "sgd, lr 0.05, cosine schedule" in text
    assert "Learning rate: 0.05 at step 10, set by hand to 0.0123 at step 20, 0.0123 at step 30." in text
    # while it runs, the duration is its clock so far
    store.update_run(rid, status="running", ended_at=None)
    panel.refresh()
    assert ", 1:10." in panel.details.text() or ", 1:09." in panel.details.text()


def test_the_table_shows_at_least_eight_runs(qtbot, store):
    panel = _panel(qtbot, store)
    panel.resize(1000, 520)                           # a short window: the tabs below give way, not the table
    rows = panel.table.verticalHeader().defaultSectionSize()
    qtbot.waitUntil(lambda: panel.table.viewport().height() >= 8 * rows, timeout=5000)   # once laid out


def test_an_unnamed_run_is_named_after_its_graph_file():
    from studio.training.controller import run_name

    assert run_name("lenet5.graph.json") == "lenet5"
    assert run_name("LeNet-5") == "LeNet-5"               # a template opened unsaved
    assert run_name("Untitled") == "Untitled"             # as the window calls it, never the spec file's "spec"
    assert run_name("") == "Untitled"


def test_the_confusion_tab_lays_its_parts_side_by_side_where_it_is_short(qtbot, store, tmp_path):
    """In the Runs workspace the tab is wide and short: stacked, the matrix, the table and the gallery
    could not have their least heights, and the splitter laid the table and its grip over the matrix's
    last rows. Now no two of the parts (and grips) overlap."""
    import numpy as np

    rid = store.create_run(name="ten", spec={}, graph=_graph(), graph_hash="6" * 64, device="cpu", params=1)
    matrix = (np.eye(10, dtype=int) * 17).tolist()
    store.add_epoch_report(rid, 1, {"confusion": matrix, "classes": [str(i) for i in range(10)]})
    panel = _panel(qtbot, store)
    panel.resize(1400, 780)                           # the Runs workspace at 1440x900
    panel.select_ids([rid])
    panel.tabs.setCurrentWidget(panel.confusion)
    qtbot.waitUntil(lambda: panel.confusion.isVisible() and panel.confusion.height() > 0, timeout=5000)   # laid out
    assert panel.confusion.height() < 480, panel.confusion.height()   # the tab is short
    qtbot.wait(50)
    panel.grab().save(str(tmp_path / "runs_confusion_short.png"))
    split = panel.confusion.split
    parts = [split.widget(i).geometry() for i in range(split.count())]
    parts += [split.handle(i).geometry() for i in range(1, split.count())]
    assert all(not a.intersects(b) for k, a in enumerate(parts) for b in parts[k + 1:]), parts
    assert panel.confusion.matrix_view.height() >= panel.confusion.matrix_view.minimumHeight()


def test_a_fine_tuned_run_s_start_is_in_its_recipe_and_details(qtbot, store):
    spec = {"optim": {"name": "sgd", "lr": 0.05}, "data": {"dataset": "digits"},
            "model": {"init_from": "/w/resnet18-f37072fd.safetensors", "frozen": ["g_stem", "g_layer1"],
                      "lr_scale": ["g_layer2=0.1"], "reinit": ["fc"]}}
    rid = store.create_run(name="tuned", spec=spec, graph=_graph(), graph_hash="7" * 64, device="cpu", params=1)
    panel = _panel(qtbot, store)
    panel.select_ids([rid])
    text = panel.details.text()
    assert "dataset digits, from resnet18-f37072fd.safetensors, 2 frozen." in text
    assert ("Start: from weights /w/resnet18-f37072fd.safetensors; frozen: g_stem, g_layer1; learning rate: "
            "g_layer2 x0.1; re-initialised: fc." in text)


def test_reading_the_table_asks_the_store_a_few_queries_not_two_a_run(store):
    """The best val accuracy and the duration of each run were two queries a run: 2,000 for 1,000 runs, 6.2 s
    of the table's first show in benchmarks/runs_1000.py (3.0 s with the grouped query, on a loaded machine)."""
    from sqlalchemy import event

    for i in range(20):
        rid = store.create_run(name=f"more {i}", spec={}, graph=_graph(), graph_hash="h", device="cpu", params=1)
        store.add_metrics(rid, [(1, "val/accuracy", 0.5), (2, "val/accuracy", 0.6 + i / 100), (2, "time", 3.0)])
        store.finish(rid, "completed")
    statements: list[str] = []
    event.listen(store.engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
    rows = {r.name: r for r in run_rows(store)}
    assert len(statements) <= 3, statements
    assert rows["more 7"].best == pytest.approx(0.67) and rows["more 7"].seconds == 3.0
    assert rows["beta"].best == pytest.approx(0.81)


def test_a_pruned_trial_s_run_says_pruned_and_why(qtbot, store, tmp_path):
    """A sweep's trial stopped by the median rule read "stopped" in Runs, like a run a user stopped; it
    now says pruned in its own colour, the rule and the epoch in the tooltip and the details."""
    from PySide6.QtGui import QColor
    from PySide6.QtTest import QTest

    reason = "pruned by the median rule after epoch 1 (val_accuracy 0.4100)"
    store.update_run(2, status="pruned", error_kind="pruned", error=reason, tags=["study:s", "trial:5"])
    store.update_run(1, status="stopped")
    panel = _panel(qtbot, store)
    panel.resize(1440, 900)
    assert _column(panel, "status") == ["failed", "pruned", "stopped"]
    col = COLUMNS.index("status")
    pruned, stopped = panel.proxy.index(1, col), panel.proxy.index(2, col)
    assert pruned.data(Qt.ItemDataRole.ToolTipRole) == reason
    colour = pruned.data(Qt.ItemDataRole.ForegroundRole)     # its own: not a stopped run's, not an unknown's grey
    assert colour not in (stopped.data(Qt.ItemDataRole.ForegroundRole), QColor("#888888"))
    QTest.mouseClick(panel.table.viewport(), Qt.MouseButton.LeftButton,
                     pos=panel.table.visualRect(pruned).center())
    panel.tabs.setCurrentIndex(2)
    assert "beta: pruned at epoch" in panel.details.text() and f"Reason: {reason}" in panel.details.text()
    QTest.keyClicks(panel.filter, "pruned")
    assert _column(panel, "name") == ["beta"]
    panel.filter.clear()
    panel.grab().save(str(tmp_path / "runs_pruned.png"))


def test_long_tags_stay_on_one_line_with_the_trial_in_view(qtbot, tmp_path):
    s = RunStore(f"sqlite:///{tmp_path / 'runs.sqlite'}")
    study = "study:learning-rate-and-width-sweep-of-the-digits-cnn"
    s.create_run(name="t", spec={}, graph=_graph(), graph_hash="0" * 64, device="cpu", params=1,
                 tags=[study, "trial:3", "retrain"])
    panel = _panel(qtbot, s)
    cell = panel.proxy.index(0, COLUMNS.index("tags"))
    assert not panel.table.wordWrap()                     # wrapped, a row showed half of a study's name
    assert cell.data() == "study:learnin…digits-cnn, trial:3, retrain"
    assert cell.data(Qt.ItemDataRole.ToolTipRole) == f"{study}\ntrial:3\nretrain"
    for text in (f"tag:{study}", "width-sweep"):            # the filter reads the whole tag
        panel.filter.setText(text)
        assert panel.proxy.rowCount() == 1, text
    s.close()
