"""New from template: a gallery of cards (thumbnail, name, description, parameter count).

The cards are read from ``assets/templates/*.graph.json``; thumbnails come from the canvas's
``render_thumbnail`` and parameter counts from the analysis (torch, imported when the gallery
first opens, well after start-up).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QMouseEvent, QPalette
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFrame,
    QGridLayout,
    QLabel,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from graph_editor.model import Graph, GraphError, load_graph
from graph_editor.ui.style import get_theme
from graph_editor.ui.thumbnail import render_thumbnail

from ..resources import template_paths
from ..widgets import named

THUMB = QSize(280, 150)
COLUMNS = 3


@dataclass
class TemplateInfo:
    path: Path
    name: str
    description: str
    graph: Graph
    params: int | None  # None when the template does not analyse


def load_templates(paths: list[Path] | None = None) -> tuple[list[TemplateInfo], list[str]]:
    """Every readable template, and one message per template that could not be read."""
    infos, errors = [], []
    for path in template_paths() if paths is None else paths:
        try:
            graph = load_graph(path)
        except GraphError as exc:
            errors.append(str(exc))
            continue
        name = str(graph.metadata.get("name") or path.name.removesuffix(".graph.json"))
        infos.append(TemplateInfo(path, name, str(graph.metadata.get("description", "")), graph, _params(graph)))
    return infos, errors


def _params(graph: Graph) -> int | None:
    from graph_editor.analysis import analyze
    from graph_editor.building import BuildError  # torch: only once the gallery opens

    try:
        return analyze(graph).total_params
    except BuildError:
        return None


class TemplateCard(QFrame):
    """One template: clicked selects it, double-clicked opens it."""

    clicked = Signal(object)
    activated = Signal(object)

    def __init__(self, info: TemplateInfo, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("card")
        self.info = info
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setFixedWidth(THUMB.width() + 24)
        self.thumb = thumb = QLabel()
        dark = self.palette().color(QPalette.ColorRole.Window).lightness() < 128  # drawn like the canvas
        thumb.setPixmap(render_thumbnail(info.graph, THUMB, get_theme("dark" if dark else "light")))
        thumb.setFixedSize(THUMB)
        title = named(QLabel(info.name), "cardTitle")
        params = f"{info.params:,} parameters" if info.params is not None else "does not validate"
        shape = "x".join(map(str, info.graph.input_spec.shape))
        meta = named(QLabel(f"{params}<br>{len(info.graph)} nodes · input {shape} · {info.graph.num_classes} classes"),
                     "cardMeta")
        doc = named(QLabel(info.description), "cardDoc")
        doc.setWordWrap(True)
        doc.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        doc.setMinimumHeight(doc.fontMetrics().lineSpacing() * 4)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 12, 12, 12)
        layout.setSpacing(6)
        for w in (thumb, title, meta, doc):
            layout.addWidget(w)
        layout.addStretch(1)
        self.setToolTip(f"{info.name}\n{info.path.name}")
        self.set_selected(False)

    def set_selected(self, selected: bool) -> None:
        self.setProperty("selected", "true" if selected else "false")
        self.style().unpolish(self)
        self.style().polish(self)

    def mousePressEvent(self, event: QMouseEvent) -> None:
        self.clicked.emit(self)
        super().mousePressEvent(event)

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:
        self.activated.emit(self)


class TemplateGallery(QDialog):
    """Pick a template; :meth:`chosen` is its path after ``accept``."""

    def __init__(self, parent: QWidget | None = None, paths: list[Path] | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("New from template")
        self.infos, self.errors = load_templates(paths)
        self.cards: list[TemplateCard] = []
        self._chosen: TemplateCard | None = None
        grid_host = QWidget()
        grid = QGridLayout(grid_host)
        grid.setSpacing(14)
        grid.setContentsMargins(14, 14, 14, 14)
        for i, info in enumerate(self.infos):
            card = TemplateCard(info)
            card.clicked.connect(self.choose)
            card.activated.connect(self._open)
            grid.addWidget(card, i // COLUMNS, i % COLUMNS)
            self.cards.append(card)
        grid.setRowStretch(len(self.infos) // COLUMNS + 1, 1)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setMinimumWidth(COLUMNS * (THUMB.width() + 24) + (COLUMNS + 1) * 14 + 20)
        scroll.setWidget(grid_host)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Open | QDialogButtonBox.StandardButton.Cancel)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        intro = QLabel("Start from a classic network; double-click a card to open it as a new, unsaved graph."
                       + (f"\nNot shown (unreadable): {'; '.join(self.errors)}" if self.errors else ""),
                       wordWrap=True)
        layout.addWidget(intro)
        layout.addWidget(scroll, 1)
        layout.addWidget(self.buttons)
        self.resize(COLUMNS * (THUMB.width() + 24) + (COLUMNS + 1) * 14 + 60, 780)
        if self.cards:
            self.choose(self.cards[0])

    def choose(self, card: TemplateCard) -> None:
        for c in self.cards:
            c.set_selected(c is card)
        self._chosen = card

    def _open(self, card: TemplateCard) -> None:
        """A double-click: this template, opened."""
        self.choose(card)
        self.accept()

    def chosen(self) -> Path | None:
        return self._chosen.info.path if self._chosen else None

    def names(self) -> list[str]:
        return [info.name for info in self.infos]


def pick_template(parent: QWidget) -> Path | None:
    """Show the gallery modally; the chosen template's path, or None when cancelled."""
    dialog = TemplateGallery(parent)
    return dialog.chosen() if dialog.exec() == QDialog.DialogCode.Accepted else None


if __name__ == "__main__":
    from studio.preview import preview

    raise SystemExit(preview(TemplateGallery, "New from template", (1000, 760)))
