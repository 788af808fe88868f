"""Preview the Inspect views on their own: ``python -m studio.inspect [TEMPLATE] [--batch N]``.

The backward graph of the template captured at the batch, beside the gradient-flow plot of three
inspected training steps on random batches (no dataset, no worker).
"""

from __future__ import annotations

import argparse

from PySide6.QtWidgets import QHBoxLayout, QVBoxLayout, QWidget


def _make(template: str, batch: int) -> QWidget:
    import torch

    from graph_editor.autograd.capture import capture_autograd
    from graph_editor.building import build_module
    from graph_editor.model import load_graph
    from studio.resources import TEMPLATES
    from trainer.inspection import InspectHistory, inspected_step

    from .backward import BackwardView
    from .flow import GradientFlowPlot, Sparkline

    graph = load_graph(TEMPLATES / f"{template}.graph.json")
    view = BackwardView()
    view.set_capture(capture_autograd(graph, batch), graph)
    flow, spark = GradientFlowPlot(), Sparkline()
    torch.manual_seed(0)
    model = build_module(graph, device="cpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    history = InspectHistory()
    for step in (10, 20, 30):
        x, y = torch.randn(batch, *graph.input_spec.shape), torch.randint(0, graph.num_classes, (batch,))
        history.add(inspected_step(model, opt, x, y, step=step, device=torch.device("cpu"), precision="fp32")[2])
    assert history.latest is not None
    flow.show_report(history.latest)
    first = history.latest.nodes[0].node
    spark.show_series(f"{first}: ||dL/dW|| over the steps", *history.series(first, "grad_w"), True)
    root = QWidget()
    right = QVBoxLayout()
    right.addWidget(flow, 3)
    right.addWidget(spark, 1)
    layout = QHBoxLayout(root)
    layout.addWidget(view, 1)
    layout.addLayout(right, 2)
    return root


def main() -> int:
    from studio.preview import preview

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("template", nargs="?", default="digits_cnn")
    parser.add_argument("--batch", type=int, default=16)
    args = parser.parse_args()
    return preview(lambda: _make(args.template, args.batch), "Inspect", (1200, 640))


if __name__ == "__main__":
    raise SystemExit(main())
