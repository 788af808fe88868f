"""The graph model: pure Python, importing neither torch nor Qt."""

from .catalog import LayerSpec, ParamSpec, PortSpec, all_layers, categories, fmt_shape, get_layer, layer
from .commands import (
    AddNode,
    Command,
    Connect,
    Disconnect,
    GroupNodes,
    Macro,
    MoveNodes,
    RemoveNodes,
    RenameGroup,
    RenameLabel,
    SetGroupCollapsed,
    SetParam,
    SetSpec,
    UndoStack,
    Ungroup,
)
from .errors import CommandError, GraphError, GraphFileError, ParamError, ShapeError
from .graph import Edge, Graph, Group, InputSpec, Node
from .layout import layered_layout
from .serialize import SCHEMA_VERSION, dumps, graph_from_dict, graph_to_dict, load_graph, loads, save_graph
from .validate import Inference, Problem, validate

__all__ = [
    "SCHEMA_VERSION", "AddNode", "Command", "CommandError", "Connect", "Disconnect", "Edge", "Graph",
    "GraphError", "GraphFileError", "Group", "GroupNodes", "Inference", "InputSpec", "LayerSpec", "Macro",
    "MoveNodes", "Node", "ParamError", "ParamSpec", "PortSpec", "Problem", "RemoveNodes", "RenameGroup", "RenameLabel",
    "SetGroupCollapsed", "SetParam", "SetSpec", "ShapeError", "UndoStack", "Ungroup", "all_layers",
    "categories", "dumps", "fmt_shape", "get_layer", "graph_from_dict", "graph_to_dict", "layer",
    "layered_layout", "load_graph", "loads", "save_graph", "validate",
]
