"""Autosave and crash recovery.

While the graph has unsaved changes it is written to a recovery file in the user's data
folder, a moment after each edit (and every minute while it stays unsaved). A normal exit (or a
save) removes it; a crash leaves it, and the next start offers to restore it. Each running
studio holds a lock beside its recovery file, so a second window never offers (or deletes) the
live work of the first; the locks and notes of sessions that ended without work to keep are
removed when the next studio looks.

Once only the minute's timer wrote, a crash in the first minute after an edit (the inspector's
segfault came at the first field touched) left nothing to offer.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QLockFile, QObject, QTimer, Signal

from graph_editor.model import Graph, load_graph
from graph_editor.model.serialize import atomic_write_text, graph_to_dict

from .document import Document

AUTOSAVE_MS = 60_000
AUTOSAVE_AFTER_EDIT_MS = 1_500  # quiet time after an edit before it is written (a burst of edits: one write)
PREFIX = "recovery-"


@dataclass(frozen=True)
class Recoverable:
    """A recovery file left by a studio that did not exit normally."""

    graph_path: Path
    original: str | None  # the file the graph came from, if it had one
    saved_at: float

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.saved_at))
        source = f"changes to {self.original}" if self.original else "an unsaved graph"
        return f"Autosaved at {when}: {source}."


class RecoveryStore:
    """The recovery folder: this session's file, and the files of sessions that crashed."""

    def __init__(self, folder: str | Path, session: str | None = None) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.session = session or f"{os.getpid()}-{int(time.time() * 1000)}"
        self._lock = QLockFile(str(self._lock_path(self.session)))
        self._lock.setStaleLockTime(0)
        self._lock.tryLock(0)

    def _graph_path(self, session: str) -> Path:
        return self.folder / f"{PREFIX}{session}.graph.json"

    def _info_path(self, session: str) -> Path:
        return self.folder / f"{PREFIX}{session}.json"

    def _lock_path(self, session: str) -> Path:
        return self.folder / f"{PREFIX}{session}.lock"

    @property
    def graph_path(self) -> Path:
        return self._graph_path(self.session)

    def write(self, graph: Graph, original: Path | None) -> Path:
        """Autosave ``graph`` (atomically, the graph first, then what it belongs to)."""
        # compact JSON, which Python's C encoder writes: the indented file format goes through its
        # pure-Python encoder, 1 s of the GUI thread after every edit of a 20,000-node graph
        atomic_write_text(self.graph_path, json.dumps(graph_to_dict(graph), separators=(",", ":")) + "\n")
        info = {"original": str(original) if original else None, "saved_at": time.time()}
        atomic_write_text(self._info_path(self.session), json.dumps(info))
        return self.graph_path

    def discard(self, session: str | None = None) -> None:
        """Remove a session's recovery files (this session's by default)."""
        session = session or self.session
        for path in (self._graph_path(session), self._info_path(session)):
            path.unlink(missing_ok=True)
        if session != self.session:
            self._lock_path(session).unlink(missing_ok=True)

    def release(self) -> None:
        """Normal exit: nothing to recover, and the lock goes."""
        self.discard()
        self._lock.unlock()

    def crashed(self) -> list[Recoverable]:
        """Recovery files of sessions that are no longer running, newest first. Locks and notes
        that sessions no longer running left without a graph are removed on the way."""
        self._clean_stale()
        found = []
        for graph_path in self.folder.glob(f"{PREFIX}*.graph.json"):
            session = graph_path.name[len(PREFIX):-len(".graph.json")]
            if session == self.session or self._alive(session):
                continue
            try:
                info = json.loads(self._info_path(session).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                info = {}
            saved_at = info.get("saved_at") if isinstance(info.get("saved_at"), int | float) else None
            found.append(Recoverable(graph_path, info.get("original") if isinstance(info.get("original"), str)
                                     else None, saved_at or graph_path.stat().st_mtime))
        return sorted(found, key=lambda r: r.saved_at, reverse=True)

    def _clean_stale(self) -> None:
        for path in (*self.folder.glob(f"{PREFIX}*.lock"), *self.folder.glob(f"{PREFIX}*.json")):
            if path.name.endswith(".graph.json"):
                continue
            session = path.name[len(PREFIX):].rsplit(".", 1)[0]
            if session == self.session or self._graph_path(session).exists() or self._alive(session):
                continue
            for leftover in (self._lock_path(session), self._info_path(session)):
                leftover.unlink(missing_ok=True)

    def _alive(self, session: str) -> bool:
        lock = QLockFile(str(self._lock_path(session)))
        lock.setStaleLockTime(0)
        if lock.tryLock(0):  # nobody holds it: that session is gone
            lock.unlock()
            return False
        return True

    def take(self, item: Recoverable) -> Graph:
        """Load a crashed session's graph (GraphFileError when it is unreadable) and forget it."""
        graph = load_graph(item.graph_path)
        self.discard(_session_of(item.graph_path))
        return graph

    def forget(self, item: Recoverable) -> None:
        self.discard(_session_of(item.graph_path))

    def set_aside(self, item: Recoverable) -> Path:
        """An autosave that cannot be read: keep it (renamed, so it is not offered again at every
        start) for the user to look at, and forget the session. Returns where it now is."""
        kept = self.folder / f"unreadable-{item.graph_path.name[len(PREFIX):]}"
        item.graph_path.replace(kept)
        self.forget(item)
        return kept


def _session_of(graph_path: Path) -> str:
    return graph_path.name[len(PREFIX):-len(".graph.json")]


class Autosaver(QObject):
    """Writes the document to the recovery store ``after_edit_ms`` after an edit and every
    ``interval_ms`` while it is dirty."""

    autosaved = Signal(str)
    failed = Signal(str)

    def __init__(self, document: Document, store: RecoveryStore, interval_ms: int = AUTOSAVE_MS,
                 parent: QObject | None = None, after_edit_ms: int = AUTOSAVE_AFTER_EDIT_MS) -> None:
        super().__init__(parent)
        self.document = document
        self.store = store
        self.timer = QTimer(self, interval=interval_ms)
        self.timer.timeout.connect(self.tick)
        self.after_edit = QTimer(self, singleShot=True, interval=after_edit_ms)
        self.after_edit.timeout.connect(self.tick)
        document.undo_stack.indexChanged.connect(self._edited)  # a method: disconnected when this goes
        document.saved.connect(lambda _path: store.discard())
        self.timer.start()

    def _edited(self, _index: int) -> None:
        self.after_edit.start()

    def tick(self) -> Path | None:
        """Autosave now if there are unsaved changes; otherwise drop a stale recovery file."""
        if not self.document.dirty:
            self.store.discard()
            return None
        try:
            path = self.store.write(self.document.graph, self.document.path)
        except OSError as exc:
            self.failed.emit(f"Autosave failed: {exc}")
            return None
        self.autosaved.emit(str(path))
        return path
