"""The memory prediction of a graph with a node that needs the data's values (``.item()``): a clear
error naming the node, and the worker's memory gate lets the run go on (the device computes it)."""

from __future__ import annotations

import pytest

from tests.graph_editor.compile_graphs import item_graph
from trainer.memory.doctor import check_run
from trainer.memory.prediction import DataDependentStep, MemoryPredictionError, largest_batch, predict_memory
from trainer.spec import RunSpec


def test_prediction_names_the_node_the_cause_and_the_line():
    graph = item_graph()
    with pytest.raises(DataDependentStep) as info:
        predict_memory(graph, 8)
    assert isinstance(info.value, MemoryPredictionError) and info.value.node == "scale"
    assert str(info.value) == (
        "Module node scale (tests.graph_editor.module_node_models:ItemScale) calls .item() at module_node_models.py:40 "
        "`return x / (x.abs().max().item() + 1.0)`: a value that depends on the data, which a meta/fake run cannot "
        "compute; the training step's memory cannot be predicted")
    with pytest.raises(DataDependentStep, match="^Module node scale"):
        largest_batch(graph, 2 ** 30)


def test_the_gate_lets_a_run_it_cannot_predict_go_on():
    spec = RunSpec()
    spec.memory.budget_mb = 1.0          # would refuse almost any prediction
    assert check_run(item_graph(), spec, device_type="cpu", total=None, channels_last=False) is None
