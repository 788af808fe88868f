"""Errors of the exporters; each names what is wrong and, where it can, the node at fault."""

from __future__ import annotations

from graph_editor.model import GraphError


class ExportError(GraphError):
    """An export that cannot be made. ``node`` names the graph node at fault when there is one
    (a layer the format cannot express), so the studio can select it on the canvas. The message
    names the node itself, so it is shown as it is."""

    def located(self) -> str:
        return self.message


class FormatUnavailable(ExportError):
    """The format needs a package that is not installed; the message says how to install it."""
