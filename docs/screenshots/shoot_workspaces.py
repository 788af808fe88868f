"""Re-take the workspace screenshots from the real window (offscreen is fine):

    QT_QPA_PLATFORM=offscreen .venv/bin/python docs/screenshots/shoot_workspaces.py [--size 1440x900]

Opens the digits CNN template, trains it for a few epochs on the embedded digits data (a real
worker process, a scratch run store; three shorter runs of the MLP and the CNN fill the Runs table),
then grabs the Design, Train, Runs and Inspect workspaces as workspace_design.png,
workspace_train.png, workspace_runs.png and workspace_inspect.png (the digits CNN's backward graph
captured at batch 32), with the size in the name when it is not 1440x900:

    for s in 1280x800 1440x900 1920x1080; do QT_QPA_PLATFORM=offscreen .venv/bin/python \
        docs/screenshots/shoot_workspaces.py --size $s; done

``--only-inspect`` re-takes workspace_inspect alone, without the training runs.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from PySide6.QtTest import QTest  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from graph_editor.model import graph_to_dict, load_graph  # noqa: E402
from studio.app import build  # noqa: E402
from studio.dialogs.import_module import ask_import  # noqa: E402
from studio.dialogs.template_gallery import pick_template  # noqa: E402
from studio.prompts import QtPrompts  # noqa: E402
from studio.resources import TEMPLATES  # noqa: E402
from studio.settings import StudioSettings  # noqa: E402


def train(window, template: str, epochs: int, timeout_s: float = 600) -> None:
    """One real run of ``template`` from the window, to its end."""
    ctl = window.training.controller()
    graph = graph_to_dict(load_graph(TEMPLATES / f"{template}.graph.json"))
    ctl.graph_name = lambda: template
    ctl.start({"model": {"graph": graph}, "device": "cpu", "train": {"epochs": epochs, "batch_size": 64}})
    end = time.monotonic() + timeout_s
    while ctl.session.is_running() and time.monotonic() < end:
        QTest.qWait(200)
    QTest.qWait(1500)   # the last events and the store's poll


def shoot_inspect(window, path: Path) -> None:
    """The Inspect workspace with the open graph's backward graph captured at batch 32, conv2 selected."""
    window.workspaces.show("Inspect")
    ws = window.inspect.workspace
    ws.batch.setValue(32)
    ws.start_capture()
    ws.task.wait()
    QTest.qWait(300)
    window.canvas.fit_view()
    window.controller.select(["conv2"] if "conv2" in window.controller.graph.nodes else [])
    ws.view.fit_view()
    QTest.qWait(300)
    window.grab().save(str(path))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", default="1440x900")
    parser.add_argument("--theme", default="dark", choices=("dark", "light"))
    parser.add_argument("--out", default=str(HERE))
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--only-inspect", action="store_true",
                        help="re-take workspace_inspect alone (no training runs: nothing else is grabbed)")
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    suffix = "" if args.size == "1440x900" else f"_{args.size}"
    app = QApplication.instance() or QApplication(sys.argv[:1])
    scratch = Path(tempfile.mkdtemp(prefix="studio-shots-"))
    settings = StudioSettings.at(scratch / "settings.ini")
    settings.set_theme(args.theme)
    window = build(app, settings, QtPrompts(pick_template, ask_import), scratch / "recovery",
                   runs_db=f"sqlite:///{scratch / 'runs.sqlite'}")
    window.training.work_dir = scratch / "launches"
    window.resize(width, height)
    window.show()
    if args.only_inspect:
        window.files.open(TEMPLATES / "digits_cnn.graph.json")
        shoot_inspect(window, out / f"workspace_inspect{suffix}.png")
        window.document.undo_stack.setClean()
        window.close()
        print(f"saved workspace_inspect{suffix}.png in {out}")
        return
    for template, epochs in (("mlp", 2), ("digits_cnn", 2), ("mlp", 4)):
        train(window, template, epochs)
    train(window, "digits_cnn", args.epochs)
    window.files.open(TEMPLATES / "digits_cnn.graph.json")
    window.live.refresh()
    window.live.analyze_now()
    window.workspaces.show("Design")
    window.controller.select(["conv1"] if "conv1" in window.controller.graph.nodes else [])
    QTest.qWait(200)
    window.canvas.fit_view()
    QTest.qWait(400)
    window.grab().save(str(out / f"workspace_design{suffix}.png"))
    window.workspaces.show("Train")
    window.training.controller().dashboard.flush(everything=True)
    QTest.qWait(600)
    window.grab().save(str(out / f"workspace_train{suffix}.png"))
    window.workspaces.show("Runs")
    runs = window.training.controller().runs
    runs.refresh()
    runs.select_ids([max(r.id for r in runs.model.rows)])
    runs.tabs.setCurrentIndex(2)                       # Details: the recipe
    QTest.qWait(400)
    window.grab().save(str(out / f"workspace_runs{suffix}.png"))
    shoot_inspect(window, out / f"workspace_inspect{suffix}.png")
    window.document.undo_stack.setClean()
    window.close()
    print(f"saved workspace_design{suffix}.png, workspace_train{suffix}.png, workspace_runs{suffix}.png, "
          f"workspace_inspect{suffix}.png in {out}")


if __name__ == "__main__":
    main()
