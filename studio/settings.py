"""The studio's persistent settings: window layout, recent files and theme, in QSettings.

Everything goes through :class:`StudioSettings`, built once in the composition root and
passed down, so tests can point it at a scratch INI file. Keys carry a schema version.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QByteArray, QSettings
from PySide6.QtWidgets import QMainWindow

SETTINGS_VERSION = 1
MAX_RECENT = 10
THEMES = ("dark", "light")


class StudioSettings:
    """Typed access to the keys the studio keeps."""

    def __init__(self, qsettings: QSettings) -> None:
        self.q = qsettings
        version = self._int("settings_version", 0)
        if version != SETTINGS_VERSION:
            # No older layout exists yet; an unknown one is dropped rather than misread.
            if version > SETTINGS_VERSION or version < 0:
                self.q.clear()
            self.q.setValue("settings_version", SETTINGS_VERSION)

    @classmethod
    def at(cls, path: str | Path) -> StudioSettings:
        """Settings kept in an INI file at ``path`` (tests, portable installs)."""
        return cls(QSettings(str(path), QSettings.Format.IniFormat))

    def _int(self, key: str, default: int) -> int:
        value = self.q.value(key, default)
        if not isinstance(value, int | float | str):   # an INI file gives strings, the registry numbers
            return default
        try:
            return int(value)
        except ValueError:
            return default

    # ------------------------------------------------------------- recent files
    def recent_files(self) -> list[str]:
        value = self.q.value("files/recent", [])
        if isinstance(value, str):  # QSettings returns a lone string for a one-item list
            value = [value]
        items = value if isinstance(value, list | tuple) else []
        return [str(v) for v in items if v][:MAX_RECENT]

    def add_recent(self, path: str | Path) -> list[str]:
        """Put ``path`` first in the recent files (no duplicates, at most MAX_RECENT)."""
        p = str(Path(path).resolve())
        files = [p] + [f for f in self.recent_files() if f != p]
        self.q.setValue("files/recent", files[:MAX_RECENT])
        return files[:MAX_RECENT]

    def remove_recent(self, path: str | Path) -> None:
        p = str(Path(path).resolve())
        self.q.setValue("files/recent", [f for f in self.recent_files() if f != p])

    def last_directory(self) -> str:
        return str(self.q.value("files/last_directory", "") or "")

    def set_last_directory(self, folder: str | Path) -> None:
        self.q.setValue("files/last_directory", str(folder))

    # -------------------------------------------------------------------- theme
    def theme(self) -> str:
        name = str(self.q.value("view/theme", "dark"))
        return name if name in THEMES else "dark"

    def set_theme(self, name: str) -> None:
        if name not in THEMES:
            raise ValueError(f"unknown theme {name!r} (expected one of {', '.join(THEMES)})")
        self.q.setValue("view/theme", name)

    # ------------------------------------------------------------------- window
    def save_window(self, window: QMainWindow) -> None:
        self.q.setValue("window/geometry", window.saveGeometry())

    def restore_window(self, window: QMainWindow) -> bool:
        """Restore the window's size and place (the docks are laid out per workspace); False when
        nothing was saved."""
        geometry = self.q.value("window/geometry")
        if not isinstance(geometry, QByteArray):
            return False
        return window.restoreGeometry(geometry)

    def workspace_state(self, name: str) -> QByteArray | None:
        """The dock layout workspace ``name`` was left in."""
        state = self.q.value(f"workspaces/{name}")
        return state if isinstance(state, QByteArray) and not state.isEmpty() else None

    def set_workspace_state(self, name: str, state: QByteArray) -> None:
        self.q.setValue(f"workspaces/{name}", state)

    def workspace(self) -> str:
        """The workspace showing when the studio last closed."""
        return str(self.q.value("workspaces/current", "Design") or "Design")

    def set_workspace(self, name: str) -> None:
        self.q.setValue("workspaces/current", name)

    def sync(self) -> None:
        self.q.sync()
