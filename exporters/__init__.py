"""Exporters: ONNX, torch.export, ExecuTorch, safetensors, PyTorch source, TensorBoard.

``export(source, format, output)`` writes one format and proves it against PyTorch; sources come
from a graph file (:func:`from_graph`) or a run in the run store (:func:`from_run`). Formats live
in :mod:`exporters.formats`, one module each, registered with :func:`export_format`.
"""

from .api import UNVERIFIED, export, output_path
from .errors import ExportError, FormatUnavailable
from .options import ATOL, DEFAULT_OPSET, RTOL, ExportOptions
from .registry import Format, Written, export_format, format_names, get_format
from .report import Check, Comparison, ExportReport, compare_outputs
from .run_source import from_run
from .source import ExportSource, from_graph, random_inputs, read_weights

__all__ = [
    "ATOL", "DEFAULT_OPSET", "RTOL", "UNVERIFIED", "Check", "Comparison", "ExportError", "ExportOptions",
    "ExportReport", "ExportSource", "Format", "FormatUnavailable", "Written", "compare_outputs", "export",
    "export_format", "format_names", "from_graph", "from_run", "get_format", "output_path", "random_inputs", "read_weights",
]
