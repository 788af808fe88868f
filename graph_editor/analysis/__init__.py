"""What a graph costs and whether it works, without real memory: per-node shapes, parameters, FLOPs and
activation bytes (:mod:`.per_node`), and the one verdict the CLI and the Problems panel share (:mod:`.check`)."""

from .. import building  # noqa: F401  (the layer families register their builders and FLOP rules first)
from .check import GraphCheck, check_graph
from .per_node import Analysis, NodeStats, analyze, summary_table

__all__ = ["Analysis", "GraphCheck", "NodeStats", "analyze", "check_graph", "summary_table"]
