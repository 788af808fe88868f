"""The Train dialog with a graph whose Module node reads the data's values (``.item()``): the memory
panel says which node keeps the peak from being predicted, and the run can still be started."""

from __future__ import annotations

import pytest

from studio.training.devices import cpu_device
from studio.training.train_dialog import TrainDialog
from tests.graph_editor.compile_graphs import item_graph

pytestmark = pytest.mark.qt


def test_the_memory_panel_names_the_node_and_start_stays_enabled(qtbot, tmp_path):
    d = TrainDialog(item_graph(), [cpu_device()])
    qtbot.addWidget(d)
    d.show()
    qtbot.waitUntil(lambda: d.dataset_summary is not None or bool(d.data_error), timeout=60_000)
    d.wait_memory()
    qtbot.waitUntil(lambda: d.memory.verdict.text().startswith("No prediction:"), timeout=60_000)
    assert d.memory.verdict.text().startswith(
        "No prediction: Module node scale (tests.graph_editor.module_node_models:ItemScale) calls .item() at "
        "module_node_models.py:40")
    assert "the training step's memory cannot be predicted" in d.memory.verdict.text()
    assert d.start_button.isEnabled(), d.problem_list()   # the device computes what fake tensors cannot
    d.memory.grab().save(str(tmp_path / "memory_item.png"))
