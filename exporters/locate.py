"""Finding the graph node behind an export failure, so the error can name it.

Built modules keep node ids as submodule names, so:
- ONNX nodes made by the dynamo exporter carry their module path in ``pkg.torch.onnx.name_scopes``;
- any other failure is located by exporting prefixes of the graph, in graph order, each on the
  model's own input: the shortest prefix that fails ends at the node named. A node exported alone
  would be tried out of its context: it can fail for a reason the model never meets (a broadcast
  parameter taken for a second batch), and pass where the model fails only after it.
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


def prefix_module(module: fx.GraphModule, end: fx.Node) -> fx.GraphModule:
    """The graph's nodes up to ``end`` (and the items read from its outputs) as a module of the same
    input: it returns every value a later node still reads, ``end``'s among them, so that no node of
    the prefix is dead code an exporter could leave out."""
    nodes = list(module.graph.nodes)
    stop = nodes.index(end) + 1
    while stop < len(nodes) and nodes[stop].op == "call_function" and nodes[stop].args[:1] == (end,):
        stop += 1  # the items of a node with several outputs belong to it
    inside = set(nodes[:stop])
    graph = fx.Graph()
    env: dict[fx.Node, fx.Node] = {}
    for node in nodes[:stop]:
        env[node] = graph.node_copy(node, env.__getitem__)
    read_later = [n for n in nodes[:stop] if n.op != "placeholder" and any(u not in inside for u in n.users)]
    if end not in read_later and not any(u in inside for u in end.users):
        read_later.append(end)
    outputs = tuple(env[n] for n in read_later)
    graph.output(outputs[0] if len(outputs) == 1 else outputs)
    return fx.GraphModule(module, graph)


def find_failing_node(module: fx.GraphModule, example: torch.Tensor, attempt: Attempt,
                      ) -> tuple[str, BaseException] | None:
    """The node whose prefix of the graph is the shortest to fail ``attempt``, with that failure; None
    when the graph's module passes whole (the cause is outside the graph's nodes) or does not run.

    Prefixes in graph order, each taking the model's own input, so every node is tried in the context
    it has in the whole model (a node exported alone fails for reasons the model never meets, and
    one that fails only after what follows it passes alone). A bisection: log2(nodes) + 1 exports."""
    try:
        with torch.no_grad():  # not inference_mode: its tensors cannot be traced again afterwards
            module(example)
    except Exception:  # the model itself does not run: nothing can be located this way
        return None
    ends = [n for n in module.graph.nodes if n.op == "call_module"]
    failures: dict[int, BaseException] = {}

    def fails(i: int) -> bool:
        try:
            attempt(prefix_module(module, ends[i]), (example,))
        except Exception as exc:
            failures[i] = exc
            return True
        return False

    if not ends or not fails(len(ends) - 1):
        return None
    lo, hi = 0, len(ends) - 1  # the prefix ending at ends[hi] fails; those before ends[lo] pass
    while lo < hi:
        mid = (lo + hi) // 2
        if fails(mid):
            hi = mid
        else:
            lo = mid + 1
    return str(ends[hi].target), failures[hi]


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
