"""Finding the graph node behind an export failure, so the error can name it.

Built modules keep node ids as submodule names, so:
- ONNX nodes made by the dynamo exporter carry their module path in ``pkg.torch.onnx.name_scopes``;
- any other failure is located by exporting each node's module alone, on the very tensors it
  receives in the full model (captured with an ``fx.Interpreter``), in graph order.
"""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Callable
from typing import Any, NoReturn

import torch
from torch import fx, nn

from graph_editor.model import Graph

from .errors import ExportError
from .preprocessing import INNER

Attempt = Callable[[nn.Module, tuple[torch.Tensor, ...]], object]


def onnx_node_owner(node: Any) -> str | None:
    """The graph node id an ONNX NodeProto came from (its first module scope, inside the preprocessing
    wrapper's ``inner`` when the model has one), or None."""
    for prop in node.metadata_props:
        if prop.key == "pkg.torch.onnx.name_scopes":
            try:
                scopes = [s for s in ast.literal_eval(prop.value) if s]
            except (ValueError, SyntaxError):
                return None
            return scopes[0].removeprefix(f"{INNER}.") if scopes else None
    return None


class _Capture(fx.Interpreter):
    def __init__(self, module: fx.GraphModule) -> None:
        super().__init__(module)
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def call_module(self, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        self.calls.append((str(target), tuple(args)))
        return super().call_module(target, args, kwargs)


def node_inputs(module: fx.GraphModule, example: torch.Tensor) -> list[tuple[str, tuple[Any, ...]]]:
    """Each node's module call, in graph order, with the tensors it receives for ``example``."""
    capture = _Capture(module)
    with torch.no_grad():  # not inference_mode: its tensors cannot be traced again afterwards
        capture.run(example)
    return capture.calls


def find_failing_node(module: fx.GraphModule, example: torch.Tensor, attempt: Attempt,
                      ) -> tuple[str, BaseException] | None:
    """The first node whose module alone fails ``attempt``, with its exception; None when all pass."""
    try:
        calls = node_inputs(module, example)
    except Exception:  # the model itself does not run: nothing can be located this way
        return None
    for node_id, args in calls:
        try:
            attempt(module.get_submodule(node_id), args)
        except Exception as exc:
            return node_id, exc
    return None


def short(exc: BaseException, limit: int = 300) -> str:
    """The first line of an exception's root cause (exporters wrap the real reason), shortened."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    text = lines[0] if lines else type(exc).__name__
    return text if len(text) <= limit else text[:limit - 3] + "..."


def node_title(graph: Graph | None, node_id: str) -> str:
    node = graph.nodes.get(node_id) if graph is not None else None
    return f"'{node_id}' ({node.type})" if node is not None else f"'{node_id}'"


def raise_at_node(what: str, module: fx.GraphModule, graph: Graph | None, example: torch.Tensor,
                  attempt: Attempt, exc: BaseException) -> NoReturn:
    """Raise an ExportError for ``exc``: naming the node that cannot be expressed when one is found."""
    found = find_failing_node(module, example, attempt)
    if found is None:
        raise ExportError(f"{what} failed: {type(exc).__name__}: {short(exc)}") from exc
    node_id, cause = found
    raise ExportError(f"{what} cannot express node {node_title(graph, node_id)}: {short(cause)}",
                      node=node_id) from exc


def batch_dims(args: tuple[Any, ...], max_batch: int | None = None, module: nn.Module | None = None,
               ) -> tuple[Any, ...]:
    """Dynamic-shape specs that mark dim 0 of every tensor argument as one shared batch dimension
    (grouped as one tuple for a ``forward(*xs)`` module such as Add or Concat)."""
    batch = torch.export.Dim("batch", max=max_batch) if max_batch else torch.export.Dim("batch")
    specs = tuple({0: batch} if isinstance(a, torch.Tensor) and a.dim() > 0 else {} for a in args)
    if module is not None and _varargs_only(module):
        return (specs,)
    return specs


def _varargs_only(module: nn.Module) -> bool:
    params = list(inspect.signature(module.forward).parameters.values())
    return len(params) == 1 and params[0].kind is inspect.Parameter.VAR_POSITIONAL


def export_program(module: nn.Module, args: tuple[Any, ...], max_batch: int | None = None,
                   ) -> torch.export.ExportedProgram:
    """``torch.export.export`` with a dynamic batch dimension: the common first step of pt2/pte/ONNX."""
    return torch.export.export(module, args, dynamic_shapes=batch_dims(args, max_batch, module))
