"""Small helpers for building widgets the typed way (PySide6's stubs take no property keywords such as
``objectName=``)."""

from __future__ import annotations

from typing import TypeVar

from PySide6.QtWidgets import QWidget

W = TypeVar("W", bound=QWidget)


def named(widget: W, name: str) -> W:
    """``widget`` with its object name set: what tests, style sheets and saved layouts find it by."""
    widget.setObjectName(name)
    return widget
