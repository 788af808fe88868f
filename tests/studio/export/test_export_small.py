"""Export from the studio: where files go, what the verdict says of untrained weights, the
Show in Folder fallback, and exported files' modes."""

from __future__ import annotations

import os
import stat

import pytest
from PySide6.QtWidgets import QApplication

from exporters import ExportOptions, export, from_graph
from graph_editor.model import load_graph
from studio.export.dialog import ExportDialog
from studio.export.hook import default_export_dir
from studio.resources import TEMPLATES

pytestmark = [pytest.mark.qt, pytest.mark.export]


def test_a_graph_inside_the_package_exports_to_the_user_s_folder(tmp_path):
    assert default_export_dir(TEMPLATES / "lenet5.graph.json").name == "Torch Studio exports"
    assert default_export_dir(tmp_path / "mine.graph.json") == tmp_path / "exports"
    assert default_export_dir(None).name == "Torch Studio exports"


def test_exported_safetensors_get_the_mode_of_the_other_exported_files(tmp_path):
    graph = load_graph(TEMPLATES / "mlp.graph.json")
    report = export(from_graph(graph), "safetensors", tmp_path, ExportOptions(timing_runs=1))
    onnx = export(from_graph(graph), "onnx", tmp_path, ExportOptions(timing_runs=1))
    mode = stat.S_IMODE(os.stat(onnx.path).st_mode)
    assert stat.S_IMODE(os.stat(report.path).st_mode) == mode
    assert stat.S_IMODE(os.stat(str(report.path).replace(".safetensors", ".graph.json")).st_mode) == mode


def test_untrained_weights_are_named_in_the_verdict_and_show_in_folder_says_where(qtbot, tmp_path):
    dialog = ExportDialog(lambda: from_graph(load_graph(TEMPLATES / "mlp.graph.json")), "onnx", tmp_path,
                          ExportOptions(timing_runs=2), untrained=True)
    qtbot.addWidget(dialog)
    with qtbot.waitSignal(dialog.exported, timeout=180_000):
        dialog.start()
    assert dialog.verdict.text().startswith("Export verified") and "untrained weights" in dialog.verdict.text()
    if QApplication.platformName() == "offscreen":            # no file manager can start here: it says where
        assert not dialog.show_in_folder()
        assert str(tmp_path) in dialog.status.text() and "No file manager" in dialog.status.text()
    dialog.wait()
