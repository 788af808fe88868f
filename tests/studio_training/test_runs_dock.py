"""The runs dock over a real SQLite run store (rows written through the trainer's RunStore)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox

from studio.training.run_history import delete_run, run_rows
from studio.training.runs_dock import COLUMNS, RunsPanel
from trainer.store import RunStore

ROOT = Path(__file__).resolve().parents[2]
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


def test_delete_asks_then_removes_rows_and_files(qtbot, store, monkeypatch):
    panel = _panel(qtbot, store)
    run_dir = Path(store.run(1).run_dir)
    panel.select_ids([1])
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.StandardButton.No)
    assert panel.delete_selected() == []
    assert run_dir.exists() and panel.row(1) is not None
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.StandardButton.Yes)
    assert panel.delete_selected() == [1]
    assert not run_dir.exists() and panel.row(1) is None
    assert [r.id for r in run_rows(store)] == [2, 3] and store.metrics(1) == []


def test_a_running_run_is_not_deleted(store):
    rid = store.create_run(name="live", spec={}, graph=_graph(), graph_hash="0" * 64, device="cpu", params=1)
    with pytest.raises(ValueError, match="still running"):
        delete_run(store, rid)
