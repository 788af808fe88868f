"""The graph's own ``nn.Module`` classes, for the layer types ``torch.nn`` does not have as such.

Each lives with its layer family in :mod:`graph_editor.building.ops` (its builder, FLOP rule and import
rules beside it); this module names them all in one place for code that reads built modules.
"""

from .ops.attention import ClassTokenPosEmbed, PatchEmbed, SelfAttention
from .ops.core import TabularEmbedding
from .ops.merge import Add, Concat, Multiply
from .ops.reshape import Permute, Reshape, SelectToken

__all__ = ["Add", "ClassTokenPosEmbed", "Concat", "Multiply", "PatchEmbed", "Permute", "Reshape", "SelectToken",
           "SelfAttention", "TabularEmbedding"]
