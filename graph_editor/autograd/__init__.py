"""The autograd graph of one training step: captured on fake tensors (:mod:`.capture`) and laid out as a
graph the design canvas draws (:mod:`.canvas_graph`)."""

from .. import building  # noqa: F401  (the layer families register their builders first)
from .canvas_graph import backward_graph
from .capture import AutogradCapture, CaptureError, capture_autograd

__all__ = ["AutogradCapture", "CaptureError", "backward_graph", "capture_autograd"]
