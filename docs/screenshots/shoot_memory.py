"""Re-take the memory screenshots from the real window (offscreen is fine):

    QT_QPA_PLATFORM=offscreen .venv/bin/python docs/screenshots/shoot_memory.py [--theme dark|light]

memory_bar.png: the Train dialog for the digits CNN with a 6 MiB budget (memory.budget_mb): the
predicted peak as a stacked bar (dataset, weights, gradients, optimizer state, activations,
transient) that does not fit, and the doctor's fixes, each with its predicted peak.
memory_timeline.png: the Train workspace during a real digits run (a worker process, a scratch run
store) after Record memory: the Memory timeline tab filled from the worker's memory_trace event,
conv2 selected on the canvas and so its band marked, and the memory plot with the predicted peak.
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
from studio.training.train_dialog import TrainDialog  # noqa: E402


def wait(until, timeout_s: float = 300) -> None:
    end = time.monotonic() + timeout_s
    while not until():
        if time.monotonic() > end:
            raise TimeoutError("the screenshot's state did not come")
        QTest.qWait(100)


def shoot_bar(window, out: Path) -> None:
    window.training.train_action.trigger()
    dialog = window.findChild(TrainDialog)
    wait(lambda: dialog._summary is not None)
    dialog.advanced.setChecked(True)
    dialog.form.set_values({"memory.budget_mb": 6})
    dialog.wait_memory()
    wait(lambda: dialog._memory is not None and dialog.memory.fix_buttons)
    QTest.qWait(300)
    dialog.grab().save(str(out / "memory_bar.png"))
    dialog.reject()


def shoot_timeline(window, out: Path) -> None:
    ctl = window.training.controller()
    ctl.graph_name = lambda: "digits_cnn"
    graph = graph_to_dict(load_graph(TEMPLATES / "digits_cnn.graph.json"))
    ctl.start({"model": {"graph": graph}, "device": "cpu", "train": {"epochs": 40, "batch_size": 64}})
    dash = ctl.dashboard
    wait(lambda: ctl.session.status == "running" and len(dash.plots["loss"].curve_names()) > 0)
    QTest.qWait(4000)                                    # a few seconds of curves
    dash.record_button.click()
    wait(lambda: bool(dash.timeline.bands))
    wait(lambda: dash.plots["memory"].level("predicted") is not None)
    window.controller.select(["conv2"])
    QTest.qWait(3000)
    dash.flush(everything=True)
    QTest.qWait(500)
    window.grab().save(str(out / "memory_timeline.png"))
    ctl.session.stop()
    wait(lambda: not ctl.session.is_running(), 120)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--theme", default="dark", choices=("dark", "light"))
    parser.add_argument("--out", default=str(HERE))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    app = QApplication.instance() or QApplication(sys.argv[:1])
    scratch = Path(tempfile.mkdtemp(prefix="studio-shots-"))
    settings = StudioSettings.at(scratch / "settings.ini")
    settings.set_theme(args.theme)
    window = build(app, settings, QtPrompts(pick_template, ask_import), scratch / "recovery",
                   runs_db=f"sqlite:///{scratch / 'runs.sqlite'}")
    window.training.work_dir = scratch / "launches"
    window.resize(1440, 900)
    window.show()
    window.files.open(TEMPLATES / "digits_cnn.graph.json")
    shoot_bar(window, out)
    shoot_timeline(window, out)
    window.document.undo_stack.setClean()
    window.close()
    print("saved memory_bar.png, memory_timeline.png")


if __name__ == "__main__":
    main()
