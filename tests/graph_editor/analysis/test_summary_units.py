"""The per-layer summary writes counts and bytes with the one formatter of graph_editor.model.units."""

from __future__ import annotations

import graph_editor.analysis.per_node as per_node
from graph_editor.analysis import analyze, summary_table
from graph_editor.model.units import count, nbytes
from tests.graph_editor.graph_testing import lenet_graph


def test_the_summary_writes_counts_and_bytes_with_the_units_formatter():
    analysis = analyze(lenet_graph(), batch=8)
    text = summary_table(analysis)
    assert f"FLOPs {count(analysis.total_flops)} per batch of 8" in text
    assert f"activations {nbytes(analysis.activation_bytes)}" in text
    conv1 = next(n for n in analysis.nodes if n.id == "conv1")
    row = next(line for line in text.splitlines() if line.startswith("conv1"))
    assert count(conv1.flops) in row.split() and nbytes(conv1.activation_bytes) in row
    assert not hasattr(per_node, "format_count")     # no second count formatter beside units.count
