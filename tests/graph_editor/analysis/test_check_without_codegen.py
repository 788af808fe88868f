"""The check the studio runs in the background after every edit builds the layers on ``meta`` but never a
GraphModule: making one writes and compiles the module's Python source, which holds the GIL (0.3 s on a
20,000-layer chain: the window froze while the check ran on its thread)."""

from __future__ import annotations

from pathlib import Path

from torch import fx

from graph_editor.analysis.check import check_graph
from graph_editor.model import load_graph

TEMPLATES = Path(__file__).resolve().parents[3] / "assets" / "templates"


def test_the_check_of_a_template_compiles_no_module_source(monkeypatch):
    made: list[str] = []
    real = fx.GraphModule.recompile

    def counted(self):  # type: ignore[no-untyped-def]
        made.append(type(self).__name__)
        return real(self)

    monkeypatch.setattr(fx.GraphModule, "recompile", counted)
    result = check_graph(load_graph(TEMPLATES / "resnet18_cifar.graph.json"))
    assert result.ok and result.analysis is not None
    assert sum(n.params for n in result.analysis.nodes) == 11_173_962   # ResNet-18 on CIFAR-10, as published
    assert made == []
