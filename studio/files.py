"""File commands of the main window: new, template, open, recent, save, import, recovery, close.

Every question goes to the injected :class:`~studio.prompts.Prompts`; every outcome is
written to the log. A file that cannot be read is reported by name and reason, and the graph
being edited stays as it was.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QWidget

from graph_editor.model import Graph, GraphError, graph_from_dict, load_graph
from graph_editor.model.finetune import KEY as FINETUNE
from graph_editor.model.finetune import FinetunePlan
from graph_editor.ui.background import collection_paused

from .document import UNTITLED, Document, starter_graph
from .prompts import Prompts
from .recovery import RecoveryStore
from .resources import ASSETS
from .settings import StudioSettings

if TYPE_CHECKING:
    from graph_editor.importer.module_import import ImportResult

Log = Callable[[str, str], None]


class FileActions(QObject):
    """The file half of the window's actions; each returns whether it went through."""

    recent_changed = Signal(list)
    opened = Signal(str)  # what the canvas should fit: a path or a name

    def __init__(self, document: Document, settings: StudioSettings, prompts: Prompts, window: QWidget,
                 log: Log, weights_dir: Path, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.document = document
        self.settings = settings
        self.prompts = prompts
        self.window = window
        self.log = log
        self.weights_dir = weights_dir     # imported pretrained weights, keyed by node ids

    # --------------------------------------------------------------- unsaved work
    def maybe_save(self) -> bool:
        """Before the graph is replaced or the window closes: True to go on."""
        if not self.document.dirty:
            return True
        answer = self.prompts.save_changes(self.window, self.document.name)
        if answer == "save":
            return self.save()
        return answer == "discard"

    # --------------------------------------------------------------- new / open
    def new(self) -> bool:
        if not self.maybe_save():
            return False
        self.document.replace(starter_graph())
        self.log("New graph", "info")
        self.opened.emit(UNTITLED)
        return True

    def new_from_template(self) -> bool:
        if not self.maybe_save():
            return False
        path = self.prompts.template(self.window)
        if path is None:
            return False
        try:
            graph = load_graph(path)
        except GraphError as exc:
            self._error("Cannot open the template", exc)
            return False
        name = str(graph.metadata.get("name") or Path(path).name)
        self.document.replace(graph, None, name=name, origin=Path(path))
        self.log(f"New graph from the template {name}", "info")
        self.opened.emit(name)
        return True

    def open(self, path: str | Path | None = None) -> bool:
        """Open ``path`` (or ask for one). The file is read before anything else: one that
        cannot be read is reported and the current graph stays, without further questions."""
        if path is None:
            path = self.prompts.open_path(self.window, self.settings.last_directory())
            if not path:
                return False
        try:
            with collection_paused():   # tens of thousands of objects, no garbage: the collector only walks them
                graph = load_graph(path)
        except GraphError as exc:
            self._error("Cannot open the graph", exc)
            return False
        if not self.maybe_save():
            return False
        resolved = Path(path).resolve()
        self.document.replace(graph, resolved)
        self._remember(resolved)
        self.log(f"Opened {resolved}", "info")
        self.opened.emit(str(resolved))
        return True

    def open_recent(self, path: str) -> bool:
        """Open a recent file; one that is gone is reported and dropped from the list."""
        if not Path(path).is_file():
            self.prompts.error(self.window, "Cannot open the graph", f"{path}: the file no longer exists")
            self.settings.remove_recent(path)
            self.recent_changed.emit(self.settings.recent_files())
            return False
        return self.open(path)

    def import_module(self) -> bool:
        """Import an nn.Module from ``module:factory`` as a new, unsaved graph."""
        if not self.maybe_save():
            return False
        request = self.prompts.import_module(self.window)
        if request is None:
            return False
        from graph_editor.importer.factory import import_factory  # torch: only when asked for

        try:
            result = import_factory(request.target, request.input_shape or None, request.num_classes or None,
                                    strict=request.strict, weights=request.weights)
        except GraphError as exc:
            self.prompts.error(self.window, "Cannot import the module", str(exc))
            self.log(f"Cannot import {request.target}: {exc}", "error")
            return False
        graph, name = result.graph, request.target.partition(":")[2]
        if result.weights_from:
            self._keep_weights(graph, result, name)
        self.document.replace(graph, None, name=name, dirty=True)
        self.log(f"Imported {request.target}: {len(graph)} nodes", "info")
        self.opened.emit(name)
        return True

    def _keep_weights(self, graph: Graph, result: ImportResult, name: str) -> None:
        """The imported weights, keyed by node ids, in the studio's weights folder; the graph's runs start
        from them (``model.init_from``, the head re-initialised where its classes differ)."""
        from safetensors.torch import save_file

        folder = self.weights_dir
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{name}-{Path(result.weights_from).stem}.safetensors"
        save_file({k: v.detach().clone().contiguous() for k, v in result.state_dict.items()}, str(path))
        graph.metadata[FINETUNE] = FinetunePlan(init_from=str(path)).to_metadata()
        self.log(f"Weights of {name} from {result.weights_from}, kept as {path}: its runs start from them", "info")

    def open_snapshot(self, data: dict, title: str) -> bool:
        """Edit a graph given as its file contents (a run's graph from the run store)."""
        try:
            graph = graph_from_dict(data)
        except GraphError as exc:
            self._error("Cannot open the run's graph", exc)
            return False
        if not self.maybe_save():
            return False
        self.document.replace(graph, None, name=title)
        self.log(f"Opened the graph of {title}", "info")
        self.opened.emit(title)
        return True

    # --------------------------------------------------------------- save
    def save(self) -> bool:
        """Save to the document's file; asks where for a new document, or for one of the studio's own
        files (a template opened from the installed package: Save must never overwrite it)."""
        path = self.document.path
        if path is None or _is_studio_file(path):
            return self.save_as()
        return self._save_to(path)

    def save_as(self) -> bool:
        current = self.document.path
        if current is not None and not _is_studio_file(current):
            suggested = str(current)
        else:
            folder = Path(self.settings.last_directory() or Path.home())
            if _is_studio_file(folder):      # the last file opened was a template
                folder = Path.home()
            suggested = str(folder / (current.name if current else _file_name(self.document.name)))
        path = self.prompts.save_path(self.window, suggested)
        return self._save_to(Path(path)) if path else False

    def _save_to(self, path: Path) -> bool:
        if _is_studio_file(path):
            self.prompts.error(self.window, "Cannot save the graph",
                               f"{path} is one of the studio's own templates: save your graph under another name")
            return False
        try:
            saved = self.document.save(path)
        except OSError as exc:
            self.prompts.error(self.window, "Cannot save the graph", f"{path}: {exc.strerror or exc}")
            self.log(f"Cannot save {path}: {exc.strerror or exc}", "error")
            return False
        self._remember(saved)
        self.log(f"Saved {saved}", "info")
        return True

    # --------------------------------------------------------------- recovery
    def offer_recovery(self, store: RecoveryStore) -> bool:
        """At start: offer the graphs that crashed sessions autosaved. True when one was restored."""
        restored = False
        for item in store.crashed():
            if restored or not self.prompts.recover(self.window, item.describe()):
                store.forget(item)
                continue
            try:
                graph = store.take(item)
            except GraphError as exc:
                kept = store.set_aside(item)
                self._error("Cannot recover the autosaved graph", f"{exc}\n\nThe file is kept as {kept}.")
                continue
            original = Path(item.original) if item.original else None
            self.document.replace(graph, original, name="Recovered", dirty=True)
            self.log(f"Recovered the graph autosaved at {item.describe()}", "warning")
            self.opened.emit("Recovered")
            restored = True
        return restored

    # --------------------------------------------------------------- helpers
    def _remember(self, path: Path) -> None:
        self.recent_changed.emit(self.settings.add_recent(path))
        self.settings.set_last_directory(path.parent)

    def _error(self, title: str, exc: GraphError | str) -> None:
        self.prompts.error(self.window, title, str(exc))
        self.log(f"{title}: {exc}", "error")


def _is_studio_file(path: Path) -> bool:
    """A file inside the studio's installed assets (its templates): read it, never write it."""
    return Path(path).resolve().is_relative_to(ASSETS.resolve())


def _file_name(name: str) -> str:
    stem = "".join(c if c.isalnum() or c in "-_" else "_" for c in name.lower()).strip("_") or "graph"
    return f"{stem}.graph.json"
