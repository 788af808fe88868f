"""Small helpers for building widgets the typed way (PySide6's stubs take no property keywords such as
``objectName=``)."""

from __future__ import annotations

from typing import TypeVar

from PySide6.QtCore import QObject

W = TypeVar("W", bound=QObject)


def named(widget: W, name: str) -> W:
    """``widget`` (or action, or any QObject) with its object name set: what tests, style sheets and
    saved layouts find it by."""
    widget.setObjectName(name)
    return widget
