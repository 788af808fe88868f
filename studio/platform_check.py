"""Before the window opens on an X11 desktop: does Qt's xcb platform plugin have its libraries?

On a fresh Debian or Ubuntu desktop the plugin can lack a few X libraries; Qt then aborts with a
message that names the wrong one (``libxcb-cursor0``, whatever is missing). Here ``ldd`` on the
plugin lists what the loader cannot find, and the studio prints the one ``apt-get`` line that
installs it, then exits. Nothing here imports Qt: it runs before the application exists.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from pathlib import Path

# Debian/Ubuntu package of each library the xcb plugin (libqxcb.so, libQt6XcbQpa.so) links.
PACKAGES = {
    "libxcb-icccm.so.4": "libxcb-icccm4", "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-cursor.so.0": "libxcb-cursor0", "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
    "libxkbcommon.so.0": "libxkbcommon0", "libxcb-xinerama.so.0": "libxcb-xinerama0",
    "libxcb-randr.so.0": "libxcb-randr0", "libxcb-render-util.so.0": "libxcb-render-util0",
    "libxcb-image.so.0": "libxcb-image0", "libxcb-shape.so.0": "libxcb-shape0", "libxcb-xkb.so.1": "libxcb-xkb1",
    "libxcb-xfixes.so.0": "libxcb-xfixes0", "libxcb-sync.so.1": "libxcb-sync1", "libxcb-shm.so.0": "libxcb-shm0",
    "libxcb-render.so.0": "libxcb-render0", "libxcb-util.so.1": "libxcb-util1", "libxcb-glx.so.0": "libxcb-glx0",
    "libxcb-xinput.so.0": "libxcb-xinput0", "libxcb.so.1": "libxcb1", "libX11-xcb.so.1": "libx11-xcb1",
    "libX11.so.6": "libx11-6", "libSM.so.6": "libsm6", "libICE.so.6": "libice6", "libEGL.so.1": "libegl1",
    "libGL.so.1": "libgl1", "libOpenGL.so.0": "libopengl0", "libfontconfig.so.1": "libfontconfig1",
    "libfreetype.so.6": "libfreetype6", "libdbus-1.so.3": "libdbus-1-3", "libglib-2.0.so.0": "libglib2.0-0",
}
_NOT_FOUND = re.compile(r"^\s*(\S+)\s*=>\s*not found", re.MULTILINE)


def xcb_plugin() -> Path | None:
    """PySide6's xcb platform plugin, without importing Qt."""
    spec = importlib.util.find_spec("PySide6")
    if spec is None or not spec.submodule_search_locations:
        return None
    plugin = Path(next(iter(spec.submodule_search_locations))) / "Qt" / "plugins" / "platforms" / "libqxcb.so"
    return plugin if plugin.is_file() else None


def missing_libraries(plugin: Path) -> list[str]:
    """The libraries ``plugin`` needs that the dynamic loader cannot find (``ldd``), in order."""
    ldd = shutil.which("ldd")
    if ldd is None:
        return []
    try:
        out = subprocess.run([ldd, str(plugin)], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return not_found(out)


def not_found(ldd_output: str) -> list[str]:
    """The sonames ``ldd`` printed as ``=> not found``, each once, in order."""
    return list(dict.fromkeys(_NOT_FOUND.findall(ldd_output)))


def package_of(library: str) -> str:
    """The Debian package that ships ``library`` (a soname), by table, else by Debian's naming rule
    (``libfoo-bar.so.3`` is in ``libfoo-bar3``, a name ending in a digit takes a dash)."""
    if library in PACKAGES:
        return PACKAGES[library]
    stem, _, version = library.partition(".so.")
    stem = stem.lower()
    version = version.split(".")[0]
    return f"{stem}-{version}" if stem[-1:].isdigit() and version else f"{stem}{version}"


def install_line(libraries: list[str]) -> str:
    """The one command that installs what is missing."""
    packages = sorted(dict.fromkeys(package_of(lib) for lib in libraries))
    return "sudo apt-get install " + " ".join(packages)


def uses_xcb(env: dict[str, str] | os._Environ = os.environ) -> bool:
    """Whether Qt will pick the xcb plugin: asked for by name, or by default on an X11 display."""
    platform = env.get("QT_QPA_PLATFORM", "").split(":")[0].strip()
    if platform:
        return platform == "xcb"
    return bool(env.get("DISPLAY")) and not env.get("WAYLAND_DISPLAY")


def check_desktop(env: dict[str, str] | os._Environ = os.environ) -> str | None:
    """None when the window can open; else what to tell the user (what is missing, how to install it)."""
    if not uses_xcb(env):
        return None
    plugin = xcb_plugin()
    if plugin is None:
        return None
    missing = missing_libraries(plugin)
    if not missing:
        return None
    return (f"Torch Studio cannot open its window: Qt's X11 plugin needs {', '.join(missing)}, "
            f"not installed. On Debian or Ubuntu install them with:\n\n    {install_line(missing)}\n")
