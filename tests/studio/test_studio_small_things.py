"""The small things a user meets in the first hour: a new network is not red, a graph with one
loose node still shows what is known."""

from __future__ import annotations

import pytest

from .helpers import open_template, settle

pytestmark = pytest.mark.qt


def test_a_new_network_starts_without_a_red_invalid_state(window):
    window.action["new"].trigger()
    settle(window)
    assert "invalid" not in window.status.validity.text()
    assert window.status.validity.objectName() == "statusNeutral"
    assert window.problems.count() == 0 and "new network" in window.problems.header.text().lower()
    assert "Fix the" not in window.summary.totals.text() and "new network" in window.summary.totals.text().lower()
    nodes = window.canvas.graph_scene.nodes
    assert all(item.severity is None for item in nodes.values())  # the unwired Output is not drawn red
    window.controller.connect("input", "out", "output", "in")   # wired: now it is judged
    settle(window)
    assert window.status.validity.objectName() in ("statusValid", "statusInvalid")
    window.controller.undo_stack.undo()                          # blank again, then a loose layer: judged, red
    assert window.controller.add_node("ReLU", (0.0, 200.0)) is None
    settle(window)
    assert nodes["output"].severity == "error"


def test_one_unconnected_node_leaves_the_summary_showing_what_is_known(window):
    open_template(window, "lenet5")
    assert window.controller.add_node("ReLU", (0.0, 400.0)) is None   # dropped, not wired
    settle(window)
    assert window.status.validity.text().startswith("✖ invalid")
    rows = {r.id: r for r in window.summary.model.rows}
    assert len(rows) == len(window.controller.graph)                     # every node listed, not an empty table
    assert tuple(rows["conv1"].shape)[-3:] == (6, 28, 28)                # inferred despite the loose node
    loose = window.controller.last_added
    assert rows[loose].shape is None
    column = [window.summary.model.index(i, 2).data() for i in range(window.summary.model.rowCount())]
    assert "—" in column
    assert "shapes are shown where they are known" in window.summary.totals.text()


def test_torch_loads_in_the_studio_with_passive_openmp_and_workers_get_the_usual_policy(monkeypatch):
    import os
    import time

    from studio.app import warm_up_passive

    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    seen = []
    monkeypatch.setattr("studio.app.warm_up", lambda: _thread(lambda: seen.append(os.environ.get("OMP_WAIT_POLICY"))))
    warm_up_passive().join()
    deadline = time.monotonic() + 10
    while "OMP_WAIT_POLICY" in os.environ and time.monotonic() < deadline:
        time.sleep(0.01)
    assert seen == ["PASSIVE"]                      # while torch loads in the studio
    assert "OMP_WAIT_POLICY" not in os.environ      # a worker started afterwards inherits nothing
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")  # the user's own setting is left alone
    warm_up_passive().join()
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE" and seen[-1] == "ACTIVE"


def _thread(fn):
    import threading

    thread = threading.Thread(target=fn)
    thread.start()
    return thread
