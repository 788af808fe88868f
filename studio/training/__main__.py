"""Preview the training dashboard on its own, with a real worker training the embedded digits.

    python -m studio.training                      # a window; the run starts at once
    python -m studio.training --screenshot out.png # offscreen too: grab it mid-run, then quit
    python -m studio.training --theme dark         # in the studio's dark theme (default: light)

The screenshot is taken after ``--at-epoch`` epochs, with a confusion cell clicked and the loss
plot's crosshair shown, so the picture has every part of the dashboard in use.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from graph_editor.model.serialize import graph_to_dict, load_graph
from trainer.protocol.events import EpochEnd

from ..resources import IconSet
from ..themes import THEME_TABLE, ThemeManager
from .dashboard import TrainingDashboard
from .plot_theme import apply_plot_theme
from .session import TrainingSession

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m studio.training", description=__doc__.splitlines()[0])
    ap.add_argument("--graph", default=str(ROOT / "assets/templates/digits_cnn.graph.json"))
    ap.add_argument("--epochs", type=int, default=16)
    ap.add_argument("--screenshot", help="save a PNG of the dashboard mid-run and quit")
    ap.add_argument("--at-epoch", type=int, default=9)
    ap.add_argument("--size", help="WIDTHxHEIGHT (default: 90%% of the screen, at most 1600x1000)")
    ap.add_argument("--theme", choices=sorted(THEME_TABLE), default="light")
    args = ap.parse_args(argv)
    existing = QApplication.instance()
    app = existing if isinstance(existing, QApplication) else QApplication(sys.argv[:1])
    ThemeManager(app, IconSet()).apply(args.theme)     # the window's palette, as in the studio
    dash = TrainingDashboard()
    apply_plot_theme(dash, args.theme)                 # and the plots' colours
    dash.setWindowTitle("Torch Studio - training")
    dash.resize(*window_size(app, args.size))
    dash.show()
    tmp = Path(tempfile.mkdtemp(prefix="studio-training-preview-"))
    session = TrainingSession(dash, f"sqlite:///{tmp / 'runs.sqlite'}", tmp / "launches")
    spec = {"name": "digits_cnn", "model": {"graph": graph_to_dict(load_graph(args.graph))}, "device": "cpu",
            "train": {"epochs": args.epochs, "batch_size": 32}, "optim": {"lr": 2e-3},
            "data": {"augment": {"translate": 1}}}
    if args.screenshot:
        _arm_screenshot(app, dash, session, Path(args.screenshot), args.at_epoch)
    session.ended.connect(lambda *_: None if args.screenshot is None else app.quit())
    session.start(spec)
    code = app.exec()
    if session.is_running():
        session.bridge.terminate()
    return code


def window_size(app: QApplication, size: str | None) -> tuple[int, int]:
    """``--size`` as given, else the main window's own default: 90% of the screen, at most 1600x1000
    (a fixed 1600x1000 ran off a 1280x800 screen)."""
    if size:
        w, h = (int(v) for v in size.lower().split("x"))
        return w, h
    screen = app.primaryScreen().availableGeometry()
    return min(1600, int(screen.width() * 0.9)), min(1000, int(screen.height() * 0.9))


def _arm_screenshot(app: QApplication, dash: TrainingDashboard, session: TrainingSession, out: Path,
                    at_epoch: int) -> None:
    def on_epoch(e: EpochEnd) -> None:
        if e.epoch == at_epoch:
            panel = dash.confusion
            off = panel.matrix_view.matrix().copy()
            np.fill_diagonal(off, 0)  # the most frequent confusion: the cell worth clicking
            t, p = divmod(int(off.argmax()), len(off))
            panel.show_cell(t, p)
            QTimer.singleShot(3000, shoot)

    def shoot() -> None:
        session.wait_predictions()
        app.processEvents()
        dash.flush(everything=True)
        loss = dash.plots["loss"]
        if "train" in loss.curve_names():
            xs = loss.buffer("train").x
            loss.show_readout(float(xs[len(xs) * 2 // 3]))
        app.processEvents()
        out.parent.mkdir(parents=True, exist_ok=True)
        dash.grab().save(str(out))
        print(f"saved {out}")
        session.bridge.terminate()
        app.quit()

    session.bridge.epoch_end.connect(on_epoch)


if __name__ == "__main__":
    sys.exit(main())
