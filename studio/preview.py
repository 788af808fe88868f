"""Show one widget on its own (Orange's ``WidgetPreview`` habit): ``python -m studio.docks.log``."""

from __future__ import annotations

import sys
from collections.abc import Callable

from PySide6.QtWidgets import QApplication, QWidget


def preview(make: Callable[[], QWidget], title: str = "", size: tuple[int, int] = (360, 560)) -> int:
    """Run ``make()`` in a fresh application and show it until closed.

    With ``TORCH_STUDIO_PREVIEW_GRAB=path.png`` set the widget is saved to that PNG and the
    preview exits at once (how the screenshots of single docks are taken).
    """
    import os

    app = QApplication.instance() or QApplication(sys.argv)
    widget = make()
    widget.setWindowTitle(title or type(widget).__name__)
    widget.resize(*size)
    widget.show()
    grab = os.environ.get("TORCH_STUDIO_PREVIEW_GRAB")
    if grab:
        app.processEvents()
        widget.grab().save(grab)
        return 0
    return app.exec()
