"""Re-take the Experiments workspace screenshot from the real window (offscreen is fine):

    QT_QPA_PLATFORM=offscreen .venv/bin/python docs/screenshots/shoot_experiments.py [--size 1440x900] [--db URL]

Without ``--db`` it first runs the issue's sweep in a scratch run store (8 trials of digits_cnn on
the embedded digits, 2 at a time, median pruning, a batch of 4096 over a 64 MiB budget: minutes on a
laptop's CPU); with ``--db`` it shows the newest study already in that store. Saves
workspace_experiments.png (the size in the name when it is not 1440x900).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from PySide6.QtTest import QTest  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from studio.app import build  # noqa: E402
from studio.dialogs.import_module import ask_import  # noqa: E402
from studio.dialogs.template_gallery import pick_template  # noqa: E402
from studio.prompts import QtPrompts  # noqa: E402
from studio.resources import TEMPLATES  # noqa: E402
from studio.settings import StudioSettings  # noqa: E402
from trainer.sweep import Sweep, SweepPlan  # noqa: E402

SPACE = "lr=1e-4..3e-2:log,batch_size=32|64|4096,node.conv1.out_channels=16..64:step16"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="1440x900")
    ap.add_argument("--db", help="a run store holding a study (default: run the sweep in a scratch store)")
    args = ap.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    tmp = Path(tempfile.mkdtemp(prefix="shoot-experiments-"))
    db = args.db or f"sqlite:///{tmp / 'runs.sqlite'}"
    if not args.db:
        Sweep(SweepPlan(graph=str(TEMPLATES / "digits_cnn.graph.json"), space=SPACE, trials=8, parallel=2,
                        budget_bytes=64 << 20, db=db, study="digits_cnn-sweep", seed=0, device="cpu"),
              log=print).run()
    app = QApplication.instance() or QApplication(sys.argv[:1])
    window = build(app, StudioSettings.at(tmp / "settings.ini"), QtPrompts(pick_template, ask_import), tmp / "recovery", runs_db=db,
                   blocks_dir=tmp / "blocks")
    window.resize(width, height)
    window.show()
    window.workspaces.show("Experiments")
    QTest.qWait(1500)
    suffix = "" if args.size == "1440x900" else f"_{args.size}"
    out = HERE / f"workspace_experiments{suffix}.png"
    window.grab().save(str(out))
    print(out)
    window.document.undo_stack.setClean()
    window.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
