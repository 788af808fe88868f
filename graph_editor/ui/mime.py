"""MIME types shared by the canvas, the palette and the system clipboard."""

from __future__ import annotations

LAYER_MIME = "application/x-torch-studio-layer"
"""A palette drag: the payload is the layer type id, utf-8 (``b"Conv2d"``)."""

GRAPH_MIME = "application/x-torch-studio-graph"
"""Copied nodes: the payload is the sub-graph JSON of :meth:`EditorController.copy`, utf-8."""
