"""Saved blocks: a selection of layers kept in the palette for reuse.

A block is the canvas's copied-nodes JSON (``GRAPH_MIME``) stored as
``<folder>/<name>.block.json``; dragging it from the palette drops it like a paste. Files
are written atomically and read back through the same checks as a paste, so a damaged file
is reported, never half-used.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from graph_editor.model.serialize import atomic_write_text
from graph_editor.ui.clipboard import parse_subgraph

SUFFIX = ".block.json"
NAME_RE = re.compile(r"^[\w][\w .+-]{0,59}$")


@dataclass(frozen=True)
class Block:
    name: str
    path: Path
    text: str
    nodes: int


class BlockLibrary:
    """The user's saved blocks in one folder."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)

    def blocks(self) -> tuple[list[Block], list[str]]:
        """Every readable block by name, and one message per file that cannot be used."""
        found, problems = [], []
        for path in sorted(self.folder.glob(f"*{SUFFIX}")) if self.folder.is_dir() else []:
            name = path.name[: -len(SUFFIX)]
            try:
                text = path.read_text(encoding="utf-8")
                nodes, _ = parse_subgraph(text)
            except (OSError, UnicodeDecodeError, ValueError) as exc:
                problems.append(f"{path}: {exc}")
                continue
            found.append(Block(name, path, text, len(nodes)))
        return found, problems

    def save(self, name: str, text: str) -> Block:
        """Keep ``text`` (copied nodes) as block ``name``; ValueError says why it cannot be."""
        name = name.strip()
        if not NAME_RE.match(name):
            raise ValueError(f"'{name}' cannot name a block: use letters, digits, spaces, '.', '+', '-' or '_' "
                             "(at most 60)")
        nodes, _ = parse_subgraph(text)
        path = self.folder / f"{name}{SUFFIX}"
        if path.exists():
            raise ValueError(f"a block named '{name}' already exists")
        atomic_write_text(path, text)
        return Block(name, path, text, len(nodes))

    def remove(self, name: str) -> None:
        (self.folder / f"{name}{SUFFIX}").unlink(missing_ok=True)
