"""Building graphs into PyTorch: a graph becomes a ``torch.fx.GraphModule`` whose submodules are named by node ids.

Each layer family's PyTorch side lives in :mod:`.ops` (builder, FLOP rule, import rules, example input);
importing this package registers every family, so the torch-side packages (:mod:`graph_editor.analysis`,
:mod:`graph_editor.autograd`, :mod:`graph_editor.importer`) import it first.
"""

from . import ops  # noqa: F401  (registers every layer family's builder, FLOP rule and import rules)
from .fx import BuildError, build_module, example_input

__all__ = ["BuildError", "build_module", "example_input"]
