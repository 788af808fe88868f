"""Re-take the README's Inspect screenshot from a real run (offscreen is fine):

    QT_QPA_PLATFORM=offscreen .venv/bin/python docs/screenshots/shoot_inspect.py [--theme dark|light]

inspect.png: the studio at 1440x900 on the ResNet-18 (CIFAR) template in the Inspect workspace, mid-run.
No CIFAR download here, so the script writes a CIFAR-shaped dataset first (``cifar_like.npz``: 3x32x32
uint8 images of 10 classes, each class a smooth colour pattern of its own under noise, so the network
learns it within an epoch) and trains on it in a real worker process (``python -m trainer run``,
started by the window as a user's Run > Train does) with ``train.inspect_every_s`` set; Inspect Now
asks for one more. The grab is taken once the worker has sent ``--inspections`` inspect events: the
backward graph captured at the run's batch (a residual block open), the ||dL/dW|| heat overlay on the
design, the gradient-flow plot of the last inspection and a node's sparkline over the run.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

import numpy as np  # noqa: E402
from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtTest import QTest  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from graph_editor.model import graph_to_dict  # noqa: E402
from studio.app import build  # noqa: E402
from studio.dialogs.import_module import ask_import  # noqa: E402
from studio.dialogs.template_gallery import pick_template  # noqa: E402
from studio.prompts import QtPrompts  # noqa: E402
from studio.resources import TEMPLATES  # noqa: E402
from studio.settings import StudioSettings  # noqa: E402


def cifar_like(path: Path, n: int = 1536, seed: int = 0) -> Path:
    """A CIFAR-shaped .npz (x: n x 3 x 32 x 32 uint8, y: n labels of 10 classes, class names) whose
    classes can be learnt: each class is a smooth random colour field; every sample is its class's
    field, shifted a little, under noise."""
    rng = np.random.default_rng(seed)
    coarse = rng.uniform(0, 255, (10, 3, 4, 4))
    fields = coarse.repeat(8, axis=2).repeat(8, axis=3)                 # 10 x 3 x 32 x 32
    y = rng.integers(0, 10, n)
    shifts = rng.integers(-3, 4, (n, 2))
    x = np.stack([np.roll(fields[c], tuple(s), axis=(1, 2)) for c, s in zip(y, shifts, strict=True)])
    x = np.clip(x + rng.normal(0, 40, x.shape), 0, 255).astype(np.uint8)
    classes = np.array(["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"])
    np.savez_compressed(path, x=x, y=y.astype(np.int64), classes=classes)
    return path


def wait_until(done, timeout_s: float, what: str) -> None:
    end = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > end:
            raise SystemExit(f"timed out waiting for {what}")
        QTest.qWait(200)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--theme", default="dark", choices=("dark", "light"))
    parser.add_argument("--out", default=str(HERE))
    parser.add_argument("--size", default="1440x900")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--inspections", type=int, default=4, help="inspect events to wait for before the grab")
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    app = QApplication.instance() or QApplication(sys.argv[:1])
    scratch = Path(tempfile.mkdtemp(prefix="studio-shots-"))
    data = cifar_like(scratch / "cifar_like.npz")
    settings = StudioSettings.at(scratch / "settings.ini")
    settings.set_theme(args.theme)
    window = build(app, settings, QtPrompts(pick_template, ask_import), scratch / "recovery",
                   runs_db=f"sqlite:///{scratch / 'runs.sqlite'}")
    window.training.work_dir = scratch / "launches"
    window.resize(width, height)
    window.show()
    window.files.open(TEMPLATES / "resnet18_cifar.graph.json")
    window.live.refresh()
    window.live.analyze_now()
    window.workspaces.show("Inspect")
    ws = window.inspect.workspace
    ws.batch.setValue(args.batch)
    ws.start_capture()
    ws.task.wait()
    QTest.qWait(300)
    ctl = window.training.controller()
    ctl.graph_name = lambda: "resnet18_cifar"
    spec = {"name": "inspect-shot", "model": {"graph": graph_to_dict(window.controller.graph)}, "device": "cpu",
            "data": {"dataset": str(data)}, "schedule": {"name": "constant"},
            "optim": {"name": "sgd", "lr": 0.02, "momentum": 0.9},
            "train": {"epochs": 20, "batch_size": args.batch, "inspect_every_s": 8.0}}
    ctl.start(spec)
    try:
        wait_until(ctl.session.is_running, 300, "the run to start")
        QTest.qWait(2000)
        window.workspaces.show("Inspect")     # the run's start brought the Train workspace forward
        wait_until(lambda: ws.history.latest is not None, 600, "the first inspection")
        QTest.mouseClick(ws.inspect_button, Qt.MouseButton.LeftButton)   # Inspect Now, as a user would: one more on the next batch
        wait_until(lambda: len(ws.history.reports) >= args.inspections, 900, f"{args.inspections} inspections")
        window.controller.select(["layer2_0_conv1"])
        view = ws.view
        view.controller.set_collapsed("g_layer2", False)
        view.controller.set_collapsed("g_layer2_0", False)
        view.fit_view()
        view.select("layer2_0_conv1")
        window.canvas.fit_view()
        QTest.qWait(500)
        out = Path(args.out)
        suffix = "" if args.size == "1440x900" else f"_{args.size}"
        window.grab().save(str(out / f"inspect{suffix}.png"))
        latest = ws.history.latest
        print(f"saved {out / f'inspect{suffix}.png'}: {len(ws.history.reports)} inspections, the last at step "
              f"{latest.step if latest else '?'} (loss {latest.loss if latest else '?'})")
    finally:
        if ctl.session.is_running():
            ctl.session.stop()
            wait_until(lambda: not ctl.session.is_running(), 60, "the run to stop")
        window.document.undo_stack.setClean()
        window.close()


if __name__ == "__main__":
    main()
