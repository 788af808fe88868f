"""Starting on a real desktop: the xcb plugin's missing libraries named with the apt-get line
that installs them, and the studio under a real X server (Xvfb) when one is installed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from studio.platform_check import (
    check_desktop,
    install_line,
    missing_libraries,
    not_found,
    uses_xcb,
    xcb_plugin,
)

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[2]
LDD = """\
\tlinux-vdso.so.1 (0x00007ffd)
\tlibQt6XcbQpa.so.6 => /venv/PySide6/Qt/lib/libQt6XcbQpa.so.6 (0x00007f)
\tlibxcb-icccm.so.4 => not found
\tlibxcb-keysyms.so.1 => not found
\tlibxcb.so.1 => /lib/x86_64-linux-gnu/libxcb.so.1 (0x00007f)
\tlibxcb-icccm.so.4 => not found
\tlibxcb-foo-bar2.so.0 => not found
"""


def test_ldd_s_missing_libraries_become_one_apt_get_line():
    missing = not_found(LDD)
    assert missing == ["libxcb-icccm.so.4", "libxcb-keysyms.so.1", "libxcb-foo-bar2.so.0"]
    assert install_line(missing) == "sudo apt-get install libxcb-foo-bar2-0 libxcb-icccm4 libxcb-keysyms1"


def test_only_an_x11_start_is_checked():
    assert uses_xcb({"DISPLAY": ":0"}) and uses_xcb({"QT_QPA_PLATFORM": "xcb"})
    assert not uses_xcb({"DISPLAY": ":0", "WAYLAND_DISPLAY": "wayland-0"})
    assert not uses_xcb({"QT_QPA_PLATFORM": "offscreen", "DISPLAY": ":0"}) and not uses_xcb({})
    assert check_desktop({"QT_QPA_PLATFORM": "offscreen"}) is None


@pytest.mark.skipif(xcb_plugin() is None or shutil.which("ldd") is None, reason="no xcb plugin or ldd here")
def test_the_studio_names_what_this_machine_lacks_instead_of_aborting(tmp_path):
    missing = missing_libraries(xcb_plugin())
    env = {"QT_QPA_PLATFORM": "xcb", "DISPLAY": ":97", "HOME": str(tmp_path), "PATH": os.environ.get("PATH", ""),
           "XDG_RUNTIME_DIR": str(tmp_path)}
    if not missing:
        assert check_desktop(env) is None
        pytest.skip("the xcb plugin has every library it needs on this machine")
    out = subprocess.run([sys.executable, "-m", "studio"], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 1
    assert install_line(missing) in out.stderr
    assert "Aborted" not in out.stderr and "core dumped" not in out.stderr


SMOKE = """
import sys
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication
import studio.app as app_module
from studio.resources import TEMPLATES

def walk():
    app = QApplication.instance()
    window = next(w for w in app.topLevelWidgets() if w.objectName() == "mainWindow")
    assert window.isVisible() and app.platformName() == "xcb", app.platformName()
    assert window.files.open(TEMPLATES / "resnet18_cifar.graph.json")
    window.canvas.fit_view()
    window.workspaces.show("Runs")
    window.workspaces.show("Design")
    app.processEvents()
    print("opened", len(window.controller.graph), flush=True)
    window.close()

app = QApplication(sys.argv[:1])  # run() takes this one; the timer needs it first
QTimer.singleShot(1500, walk)
sys.exit(app_module.run([]))
"""


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("xvfb-run") is None, reason="xvfb-run is not installed")
def test_the_studio_starts_under_a_real_x_server_opens_a_template_and_closes(tmp_path):
    if xcb_plugin() is not None and missing_libraries(xcb_plugin()):
        pytest.skip("the xcb plugin lacks libraries here: " + install_line(missing_libraries(xcb_plugin())))
    env = {k: v for k, v in os.environ.items() if k not in ("QT_QPA_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY")}
    env.update(HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_DATA_HOME=str(tmp_path / "data"),
               PYTHONPATH=str(ROOT))
    out = subprocess.run(["xvfb-run", "-a", "-s", "-screen 0 1440x900x24", sys.executable, "-c", SMOKE], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "opened" in out.stdout, out.stderr[-3000:]
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
