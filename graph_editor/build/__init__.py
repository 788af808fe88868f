"""Building graphs into PyTorch: ``build_module``, ``analyze`` and ``import_module``."""

from . import ops  # noqa: F401  (registers every layer family's builder, FLOP rule and import rules)
from .analysis import Analysis, NodeStats, analyze, format_count, summary_table
from .fx import BuildError, build_module, example_input
from .importer import ImportResult, ModuleImportError, Unsupported, guess_input_shape, import_module

__all__ = ["Analysis", "BuildError", "ImportResult", "ModuleImportError", "NodeStats", "Unsupported", "analyze",
           "build_module", "example_input", "format_count", "guess_input_shape", "import_module", "summary_table"]
