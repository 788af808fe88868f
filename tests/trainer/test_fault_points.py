"""The test-only fault plan of checkpoint saves: a point it does not know is an error, not a plan that never fires."""

from __future__ import annotations

import pytest

from trainer.checkpoints.single_file import FAULT_ENV, FAULT_POINTS, fault_point


def test_a_kill_plan_naming_no_save_point_is_refused(monkeypatch):
    monkeypatch.setenv(FAULT_ENV, "kill:writen:2")
    with pytest.raises(ValueError, match="no save point 'writen'") as caught:
        fault_point("written")
    assert all(p in str(caught.value) for p in FAULT_POINTS)


def test_a_kill_plan_for_another_point_lets_this_one_pass(monkeypatch):
    monkeypatch.setenv(FAULT_ENV, "kill:pruned")
    for point in FAULT_POINTS[:-1]:
        fault_point(point)     # not the planned point: returns, the process lives on
