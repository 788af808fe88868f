"""Re-take the README screenshots from the real widgets (offscreen is fine):

    QT_QPA_PLATFORM=offscreen .venv/bin/python docs/screenshots/shoot.py [--theme dark|light]

main_window.png: the studio at 1600x1000 with the ResNet-18 template open at Fit View, its
first stage opened in place and that stage's first residual block selected; template_gallery.png: File > New from Template; inspector.png: the inspector
refusing a bad kernel size.
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
from studio.dialogs.template_gallery import TemplateGallery, pick_template  # noqa: E402
from studio.prompts import QtPrompts  # noqa: E402
from studio.resources import TEMPLATES  # noqa: E402
from studio.settings import StudioSettings  # noqa: E402


def settle(window, ms: int = 200) -> None:
    QTest.qWait(ms)
    window.live.refresh()
    window.live.analyze_now()
    QTest.qWait(ms)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--theme", default="dark", choices=("dark", "light"))
    parser.add_argument("--out", default=str(HERE))
    parser.add_argument("--layout", action=argparse.BooleanOptionalAction, default=True,
                        help="auto-layout the template first (default)")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    app = QApplication.instance() or QApplication(sys.argv[:1])
    scratch = Path(tempfile.mkdtemp(prefix="studio-shots-"))
    settings = StudioSettings.at(scratch / "settings.ini")
    settings.set_theme(args.theme)
    window = build(app, settings, QtPrompts(pick_template, ask_import), scratch / "recovery")
    window.resize(1600, 1000)
    window.show()
    window.files.open(TEMPLATES / "resnet18.graph.json")
    settle(window)
    if args.layout:
        window.action["auto_layout"].trigger()
        settle(window)
    groups = {g.name: k for k, g in window.controller.graph.groups.items()}
    window.controller.set_collapsed(groups["layer1"], False)  # opened in place, as a double-click does
    settle(window)
    window.controller.select([groups["layer1.0"]])
    window.canvas.fit_view()
    QTest.qWait(100)
    window.grab().save(str(out / "main_window.png"))

    window.controller.select(["layer1_0_conv1"])
    editor = window.inspector.editors["kernel_size"]
    editor.field.setText("0, 3")
    editor.field.editingFinished.emit()
    settle(window, 100)
    window.docks["inspector"].grab().save(str(out / "inspector.png"))

    gallery = TemplateGallery(window)
    gallery.show()
    QTest.qWait(200)
    gallery.grab().save(str(out / "template_gallery.png"))
    gallery.close()
    window.document.undo_stack.setClean()
    window.close()
    print(f"saved main_window.png, inspector.png, template_gallery.png in {out}")


if __name__ == "__main__":
    main()
