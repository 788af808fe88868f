"""Exporters: ONNX, torch.export, ExecuTorch, safetensors, PyTorch source, TensorBoard.

``export(source, format, output)`` writes one format and proves it against PyTorch; sources come
from a graph file (:func:`from_graph`) or a run in the run store (:func:`from_run`). Formats live
in :mod:`exporters.formats`, one module each, registered with :func:`export_format`.

The names below load on first use, so that ``exporters.registry`` (which the studio's menus read
before torch is imported) costs no torch import.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .api import UNVERIFIED, export, output_path
    from .errors import ExportError, FormatUnavailable
    from .options import ATOL, DEFAULT_OPSET, RTOL, ExportOptions
    from .registry import Format, Written, export_format, format_names, get_format
    from .report import Check, Comparison, ExportReport, compare_outputs
    from .run_source import from_run
    from .source import ExportSource, from_graph, random_inputs, read_weights

_WHERE = {
    "api": ("UNVERIFIED", "export", "output_path"),
    "errors": ("ExportError", "FormatUnavailable"),
    "options": ("ATOL", "DEFAULT_OPSET", "RTOL", "ExportOptions"),
    "registry": ("Format", "Written", "export_format", "format_names", "get_format"),
    "report": ("Check", "Comparison", "ExportReport", "compare_outputs"),
    "run_source": ("from_run",),
    "source": ("ExportSource", "from_graph", "random_inputs", "read_weights"),
}
_MODULE_OF = {name: module for module, names in _WHERE.items() for name in names}

__all__ = [
    "ATOL", "DEFAULT_OPSET", "RTOL", "UNVERIFIED", "Check", "Comparison", "ExportError", "ExportOptions",
    "ExportReport", "ExportSource", "Format", "FormatUnavailable", "Written", "compare_outputs", "export",
    "export_format", "format_names", "from_graph", "from_run", "get_format", "output_path", "random_inputs",
    "read_weights",
]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'exporters' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
