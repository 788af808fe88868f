"""Breadcrumbs over the canvas: where the selection sits among the blocks, each step a link.

``Network › layer3 › layer3.1`` for a convolution inside ResNet's ``layer3.1``; a click on a
step selects that block and brings it into view (the first step shows the whole network).
The crumbs are rebuilt after the event that changed the selection has returned, never
inside a crumb's own click.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QHBoxLayout, QLabel, QToolButton, QWidget

from ..model.hierarchy import path_of

if TYPE_CHECKING:
    from .canvas import GraphCanvas
    from .style import Theme

MARGIN = 12
TOP = "Network"


class Breadcrumbs(QWidget):
    """An overlay in the top-left corner of a :class:`GraphCanvas`; hidden outside blocks."""

    def __init__(self, canvas: GraphCanvas) -> None:
        super().__init__(canvas)
        self.canvas = canvas
        self.path: list[str] = []
        self.buttons: list[QToolButton] = []
        self.row = row = QHBoxLayout(self)
        row.setContentsMargins(6, 2, 6, 2)
        row.setSpacing(2)
        self._rebuild = QTimer(self, singleShot=True, interval=0)
        self._rebuild.timeout.connect(self._build)
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)  # the style sheet's background
        self.hide()

    def schedule(self, *_: object) -> None:
        """Rebuild soon (after the current event): the selection or the blocks changed."""
        self._rebuild.start()

    def set_theme(self, t: Theme) -> None:
        self.setStyleSheet(
            f"Breadcrumbs {{ background: {t.node_body.name()}; border: 1px solid {t.group_border.name()}; "
            f"border-radius: 4px; }} QToolButton {{ color: {t.text.name()}; border: none; padding: 2px 4px; }}"
            f" QToolButton:hover {{ color: {t.selected.name()}; }} QLabel {{ color: {t.text_dim.name()}; }}")

    def _build(self) -> None:
        controller = self.canvas.controller
        graph = controller.graph
        selection = controller.selection
        path = path_of(graph.groups, selection[0]) if len(selection) == 1 else []
        self.path = path
        row = self.row
        while row.count():
            taken = row.takeAt(0)
            widget = taken.widget() if taken is not None else None
            if widget is not None:
                widget.hide()
                widget.deleteLater()
        self.buttons = []
        if not path:
            self.hide()
            return
        for k, gid in enumerate([None, *path]):
            if k:
                row.addWidget(QLabel("›"))
            group = graph.groups.get(gid) if gid else None
            button = QToolButton()
            button.setText(TOP if group is None else group.name)
            button.setAutoRaise(True)
            button.setCursor(Qt.CursorShape.PointingHandCursor)
            button.setToolTip("Show the whole network" if group is None else
                              f"Select {group.name}" + (f" ({group.kind})" if group.kind else ""))
            button.clicked.connect(lambda _=False, g=gid: self.go(g))
            row.addWidget(button)
            self.buttons.append(button)
        # A child added to a widget already shown is shown only at the next event, and until then the
        # layout sizes it 0x0: the bar was cut to nothing and a click on it went nowhere. Show them now.
        for k in range(row.count()):
            if (item := row.itemAt(k)) is not None and (widget := item.widget()) is not None:
                widget.show()
        row.activate()
        self.adjustSize()
        self.move(MARGIN, MARGIN)
        self.show()
        self.raise_()

    def go(self, gid: str | None) -> None:
        """Select block ``gid`` and bring it into view (None: the whole network)."""
        if gid is None:
            self.canvas.controller.select([])
            self.canvas.fit_view()
            return
        self.canvas.controller.select([gid])
        self.canvas.show_group(gid)
