"""The export dialog (offscreen): the proof of a real ONNX export, and a node-named failure."""

from __future__ import annotations

import pytest

from exporters import ExportOptions, from_graph
from graph_editor.model import load_graph
from tests.exporters.export_graphs import TEMPLATES, tiny_ln_graph

pytestmark = [pytest.mark.qt, pytest.mark.export]


def test_the_dialog_shows_the_checks_and_figures_of_an_onnx_export(qtbot, tmp_path):
    from studio.export.dialog import ExportDialog

    dialog = ExportDialog(lambda: from_graph(load_graph(TEMPLATES / "mlp.graph.json")), "onnx", tmp_path,
                          ExportOptions(timing_runs=2))
    qtbot.addWidget(dialog)
    with qtbot.waitSignal(dialog.exported, timeout=180_000) as blocker:
        dialog.start()
    assert blocker.args == [True]
    assert "verified" in dialog.verdict.text()
    assert dialog.checks.rowCount() == 4 and dialog.checks.item(2, 0).text().startswith("✔ onnxruntime parity")
    assert dialog.checks.item(3, 0).text() == "✔ metadata"
    latency = dialog.findChild(type(dialog.verdict), "figure_latency").text()
    assert "onnxruntime" in latency and "PyTorch eager" in latency
    assert dialog.folder_button.isEnabled() and not dialog.node_button.isVisibleTo(dialog)
    assert (tmp_path / "mlp.onnx").exists()
    dialog.wait()


def test_a_layer_the_format_cannot_express_offers_its_node(qtbot, tmp_path):
    from studio.export.dialog import ExportDialog

    dialog = ExportDialog(lambda: from_graph(tiny_ln_graph()), "onnx", tmp_path, ExportOptions(opset=13))
    qtbot.addWidget(dialog)
    with qtbot.waitSignal(dialog.exported, timeout=180_000) as blocker:
        dialog.start()
    assert blocker.args == [False]
    assert "node 'ln1' (LayerNorm)" in dialog.status.text() and dialog.node_button.isVisibleTo(dialog)
    with qtbot.waitSignal(dialog.node_chosen) as chosen:
        dialog.node_button.click()
    assert chosen.args == ["ln1"]
    dialog.wait()
