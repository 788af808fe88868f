"""Errors of the graph model; each names what is wrong and where."""

from __future__ import annotations


class GraphError(Exception):
    """Base class: a problem with a graph, optionally located at a node and a field."""

    def __init__(self, message: str, node: str | None = None, field: str | None = None) -> None:
        self.message = message
        self.node = node
        self.field = field
        super().__init__(self.located())

    def located(self) -> str:
        where = []
        if self.node is not None:
            where.append(f"node '{_cut(self.node)}'")
        if self.field is not None:
            where.append(f"field '{_cut(self.field)}'")
        return f"{', '.join(where)}: {self.message}" if where else self.message


def _cut(name: str, limit: int = 200) -> str:   # node ids may be 200 long: shown whole
    """A name from a file, cut to a readable length: a 4000-character key is named, never echoed whole."""
    name = str(name)
    return name if len(name) <= limit else f"{name[:limit - 30]}... ({len(name)} characters)"


class ParamError(GraphError):
    """A parameter value outside its type, bounds or choices."""


class ShapeError(GraphError):
    """A layer cannot accept the shapes it receives."""


class CommandError(GraphError):
    """An edit that cannot be applied (the graph is left unchanged)."""


class GraphFileError(GraphError):
    """A graph file that cannot be read; the message names the file, node and field at fault."""

    def __init__(self, message: str, node: str | None = None, field: str | None = None,
                 path: str | None = None) -> None:
        self.path = path
        super().__init__(message, node, field)

    def located(self) -> str:
        inner = super().located()
        return f"{self.path}: {inner}" if self.path else inner
