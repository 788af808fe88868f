"""Ops whose result depends on the data: what a meta or fake-tensor run cannot compute, said clearly.

Shapes, memory and the autograd graph are measured on ``meta`` or fake tensors: no values, so an op
that needs one fails there. ``t.item()``, ``float(t)`` or an ``if`` on a tensor read a value
(``aten._local_scalar_dense``); ``torch.nonzero``, boolean masks and ``torch.unique`` make a tensor
whose shape depends on the values. On ``meta`` these raise ``RuntimeError`` or
``NotImplementedError``, under ``FakeTensorMode`` ``DataDependentOutputException`` or
``DynamicOutputShapeException``. :func:`data_dependent_cause` recognises them, :func:`user_line`
finds the line of the module's code that did it, :func:`tracking_nodes` records which graph node
was running, and :func:`describe` puts it together:

    Module node scale (pkg.mod:ItemScale) calls .item() at mod.py:40 `return x / x.max().item()`: a
    value that depends on the data, which a meta/fake run cannot compute; its memory cannot be predicted
"""

from __future__ import annotations

import linecache
import os
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from ..model import Graph

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_OURS = tuple(os.path.join(_ROOT, p) + os.sep for p in ("graph_editor", "trainer", "exporters", "studio"))
_READS = ("_local_scalar_dense", "Tensor.item()")
_SHAPES = ("nonzero", "masked_select", "_unique", "unique_consecutive", "repeat_interleave", "bincount")


def data_dependent_cause(exc: BaseException) -> str | None:
    """What ``exc`` says the code did that needs the data ('calls .item()', ...), or None when
    ``exc`` is some other failure."""
    from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException

    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, DataDependentOutputException) or any(r in text for r in _READS):
        return "calls .item()" if ".item()" in user_line(exc) or "Tensor.item()" in text else "reads a tensor's value"
    if "GuardOnDataDependentSymNode" in type(exc).__name__ or "data-dependent" in text.lower():
        return "branches on a tensor's value"
    if isinstance(exc, DynamicOutputShapeException | NotImplementedError | RuntimeError):
        op = next((s for s in _SHAPES if s in text), None)
        if op is not None and (isinstance(exc, DynamicOutputShapeException) or "meta" in text.lower()):
            return f"makes a tensor whose shape depends on the values ({op.strip('_')})"
    return None


def user_line(exc: BaseException) -> str:
    """``file.py:N `code``` of the innermost frame of ``exc``'s traceback outside torch and this
    project's packages (the module's own code), or '' when there is none."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not f.filename.startswith((_TORCH_DIR, *_OURS)) and not f.filename.startswith("<")]
    if not frames:
        return ""
    f = frames[-1]
    code = (f.line or linecache.getline(f.filename, f.lineno or 0)).strip()
    return f"{os.path.basename(f.filename)}:{f.lineno}" + (f" `{code}`" if code else "")


def node_label(graph: Graph | None, node: str | None, module: nn.Module | None = None) -> str:
    """How a message names ``node``: 'Module node m3 (pkg.mod:Cls)', 'node conv (Conv2d)'."""
    if node is None:
        return "the graph"
    gn = graph.nodes.get(node) if graph is not None else None
    if gn is not None:
        if gn.type == "Module":
            return f"Module node {node} ({gn.params.get('cls', '?')})"
        return f"node {node} ({gn.type})"
    if module is not None and hasattr(module, node):
        return f"module {node} ({type(getattr(module, node)).__name__})"
    return f"node {node}"


def describe(exc: BaseException, label: str, consequence: str) -> str | None:
    """The message for a data-dependent failure of ``label`` (see the module's docstring), or None
    when ``exc`` is not one. ``consequence``: what cannot be known because of it."""
    cause = data_dependent_cause(exc)
    if cause is None:
        return None
    where = user_line(exc)
    return (f"{label} {cause}{' at ' + where if where else ''}: a value that depends on the data, which a "
            f"meta/fake run cannot compute; {consequence}")


@contextmanager
def tracking_nodes(module: nn.Module) -> Iterator[list[str | None]]:
    """While inside, ``box[0]`` is the top-level child of ``module`` (a graph node id) whose forward
    runs, or the last one that started; None before the first."""
    box: list[str | None] = [None]

    def pre(name: str) -> Any:
        def hook(_m: nn.Module, _args: Any) -> None:
            box[0] = name
        return hook

    handles = [child.register_forward_pre_hook(pre(name)) for name, child in module.named_children()]
    try:
        yield box
    finally:
        for h in handles:
            h.remove()
