"""Re-take the Inspect workspace screenshot (offscreen is fine):

    QT_QPA_PLATFORM=offscreen .venv/bin/python docs/screenshots/shoot_inspect.py [--theme dark|light]

inspect.png: the studio at 1600x1000 on the ResNet-18 (CIFAR) template in the Inspect workspace:
the backward graph captured at batch 32 (one block expanded), and the live figures of three
inspected training steps (SGD with momentum, random CIFAR-shaped batches: no dataset is
downloaded) as the gradient-flow plot, the ||dL/dW|| heat overlay and a node's sparkline.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

import torch  # noqa: E402
from PySide6.QtTest import QTest  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from graph_editor.build import build_module  # noqa: E402
from studio.app import build  # noqa: E402
from studio.dialogs.import_module import ask_import  # noqa: E402
from studio.dialogs.template_gallery import pick_template  # noqa: E402
from studio.prompts import QtPrompts  # noqa: E402
from studio.resources import TEMPLATES  # noqa: E402
from studio.settings import StudioSettings  # noqa: E402
from trainer.inspect import inspected_step  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--theme", default="dark", choices=("dark", "light"))
    parser.add_argument("--out", default=str(HERE))
    args = parser.parse_args()
    app = QApplication.instance() or QApplication(sys.argv[:1])
    scratch = Path(tempfile.mkdtemp(prefix="studio-shots-"))
    settings = StudioSettings.at(scratch / "settings.ini")
    settings.set_theme(args.theme)
    window = build(app, settings, QtPrompts(pick_template, ask_import), scratch / "recovery")
    window.resize(1600, 1000)
    window.show()
    window.files.open(TEMPLATES / "resnet18_cifar.graph.json")
    QTest.qWait(200)
    window.live.refresh()
    window.live.analyze_now()
    window.action["auto_layout"].trigger()
    QTest.qWait(200)
    window.workspaces.show("Inspect")
    ws = window.inspect.workspace
    ws.batch.setValue(32)
    ws.start_capture()
    ws.task.wait()
    QTest.qWait(300)
    torch.manual_seed(0)
    graph = window.controller.graph
    model = build_module(graph, device="cpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for step in (50, 100, 150):
        x, y = torch.randn(16, *graph.input_spec.shape), torch.randint(0, graph.num_classes, (16,))
        _, _, report = inspected_step(model, opt, x, y, step=step, device=torch.device("cpu"), precision="fp32")
        ws.add_report(report)
    window.controller.select(["layer1_0_conv2"])
    ws.view.backward.blocks["layer1_0_bn2"].set_expanded(True)
    window.canvas.fit_view()
    QTest.qWait(300)
    out = Path(args.out)
    window.grab().save(str(out / "inspect.png"))
    print(out / "inspect.png")


if __name__ == "__main__":
    main()
