"""How big the canvas draws a node or a block, known without Qt.

Layouts made away from the canvas (templates, the fx importer, scripts) must leave room for
the boxes the canvas will draw, so the sizes live here, in pure Python, and the canvas items
take their constants from this module. ``param_rows`` is what a node shows under its name.
"""

from __future__ import annotations

from typing import Any

from .graph import Node

NODE_W = 150.0
TITLE_H = 22.0
ROW_H = 15.0
SHAPE_H = 18.0
PORT_Y = TITLE_H + ROW_H / 2 + 1  # ports sit on the name row: chains of nodes draw straight wires
BOX_W = 190.0
BOX_ROWS = 3  # what a block shows under its title: its kind, parameters, FLOPs
ABBREV = {"out_channels": "out", "out_features": "out", "kernel_size": "kernel", "output_size": "size",
          "num_heads": "heads", "nhead": "heads", "embed_dim": "dim", "patch_size": "patch",
          "num_features": "features", "negative_slope": "slope", "start_dim": "from", "end_dim": "to"}


def fmt_value(value: Any) -> str:
    """A parameter value as it reads on a node: [3, 3] -> '3', [3, 1] -> '3x1'."""
    if isinstance(value, list | tuple):
        return str(value[0]) if value and len(set(value)) == 1 else "x".join(str(v) for v in value) or "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    return "auto" if value is None else str(value)


def param_rows(node: Node) -> list[tuple[str, str]]:
    """The key parameters worth showing: the first always, the others when not default."""
    spec = node.spec
    if spec is None:
        return []
    rows = []
    for i, name in enumerate(spec.key_params):
        if not spec.has_param(name):
            continue
        value = node.params.get(name, spec.param(name).default)
        if i > 0 and value == spec.param(name).default:
            continue
        # A list of sizes (a Split's parts) is not a shape: "1, 2", not "1x2".
        text = ", ".join(map(str, value)) if name == "sizes" and isinstance(value, list) else fmt_value(value)
        rows.append((ABBREV.get(name, name.replace("_", " ")), text))
    return rows[:4]


def node_height(rows: int) -> float:
    """A node's height with ``rows`` parameter rows under its name."""
    return TITLE_H + ROW_H * (1 + rows) + SHAPE_H + 4


def outputs_height(outputs: int) -> float:
    """The height a node needs for ``outputs`` output ports, one per row (a Split's parts)."""
    return PORT_Y + (outputs - 0.5) * ROW_H + SHAPE_H


def node_size(node: Node) -> tuple[float, float]:
    """(width, height) of ``node`` as the canvas draws it."""
    spec = node.spec
    outputs = len(spec.outputs_for(node.params)) if spec is not None else 1
    return NODE_W, max(node_height(len(param_rows(node))), outputs_height(outputs))


def box_height(ports: int) -> float:
    """A collapsed block's height with ``ports`` ports on its busier side."""
    return node_height(max(BOX_ROWS - 1, ports - 1))


def box_size(ports: int) -> tuple[float, float]:
    return BOX_W, box_height(ports)


