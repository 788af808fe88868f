"""File > Import Module with pretrained weights, as a user does it: Ctrl+I, the weights from the local
torch hub cache (a folder the test fills), the graph's runs then starting from them."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QLabel

from graph_editor.model.finetune import plan_of
from studio.dialogs.import_module import FROM_FILE, ImportModuleDialog
from studio.prompts import ImportRequest
from studio.training.devices import cpu_device
from studio.training.train_dialog import TrainDialog
from tests.graph_editor.importer.test_pretrained_import import NETS

pytestmark = pytest.mark.qt


def test_the_dialog_asks_for_the_weights_file_when_it_is_chosen(qtbot):
    d = ImportModuleDialog()
    qtbot.addWidget(d)
    d.show()
    about = d.findChild(QLabel, "about").text() + d.strict.toolTip()   # what a user reads of the fallback
    assert "Program node" in about and "Module node" not in about       # Program nodes replaced Module nodes
    QTest.keyClicks(d.target, "pretrained_nets:tinynet")
    assert d.request().weights == "" and not d.weights_file.isEnabled()
    d.weights.setCurrentText(FROM_FILE)
    assert d.weights_file.isEnabled() and d.request() == "give the weights file, or choose other weights"
    QTest.keyClicks(d.weights_file, "/data/tinynet.pth")
    assert d.request().weights == "/data/tinynet.pth"


def test_ctrl_i_imports_a_model_with_its_cached_weights_and_its_runs_start_from_them(
        window, prompts, qtbot, tmp_path, monkeypatch):
    (tmp_path / "pretrained_nets.py").write_text(textwrap.dedent(NETS))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    hub = tmp_path / "torch" / "hub" / "checkpoints"
    hub.mkdir(parents=True)
    from graph_editor.importer.factory import load_factory

    pretrained = load_factory("pretrained_nets:tinynet")
    for p in pretrained.parameters():
        p.data.fill_(0.25)
    torch.save(pretrained.state_dict(), hub / "tinynet-0badc0de.pth")
    prompts.answer("import_module", ImportRequest("pretrained_nets:tinynet", (3, 16, 16), 0, weights="cache"))
    window.activateWindow()
    QTest.keyClick(window, Qt.Key.Key_I, Qt.KeyboardModifier.ControlModifier)
    graph = window.controller.graph
    init = Path(plan_of(graph).init_from)
    assert init.parent == tmp_path / "weights" and init.is_file()
    from safetensors.torch import load_file

    kept = load_file(str(init))
    conv = next(n.id for n in graph if n.type == "Conv2d")
    assert torch.equal(kept[f"{conv}.weight"], torch.full((8, 3, 3, 3), 0.25))   # keyed by node id
    d = TrainDialog(graph, [cpu_device()])
    qtbot.addWidget(d)
    assert d.spec()["model"]["init_from"] == str(init)
    assert d.finetune_label.text() == f"from weights {init}"
    d.wait_preview()
    d.close()
