"""Fixtures for the studio shell: a real main window (offscreen) whose questions are answered
by a script instead of modal dialogs, with settings and recovery files in a temporary folder
(helpers live in helpers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QEvent
from PySide6.QtWidgets import QApplication

from .helpers import ScriptedPrompts


@pytest.fixture
def prompts() -> ScriptedPrompts:
    return ScriptedPrompts()


@pytest.fixture
def make_window(qapp, tmp_path, prompts):
    """Build main windows like the app does; closed (without questions) at the end."""
    from studio.app import build
    from studio.settings import StudioSettings

    windows = []
    style, palette, sheet = qapp.style().name(), qapp.palette(), qapp.styleSheet()

    def make(recovery_dir: Path | None = None, settings_file: Path | None = None):
        settings = StudioSettings.at(settings_file or tmp_path / "settings.ini")
        window = build(qapp, settings, prompts, recovery_dir or tmp_path / "recovery", autosave_ms=3_600_000,
                       runs_db=f"sqlite:///{tmp_path / 'runs.sqlite'}", blocks_dir=tmp_path / "blocks")
        window.show()
        windows.append(window)
        return window

    yield make
    for window in windows:
        window.document.undo_stack.setClean()
        window.close()
        window.deleteLater()
    QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    qapp.setStyleSheet(sheet)  # leave the application as other tests expect it
    qapp.setPalette(palette)
    qapp.setStyle(style)


@pytest.fixture
def window(make_window):
    return make_window()
