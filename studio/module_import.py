"""Import an ``nn.Module`` from ``module:factory`` as a graph (through the fx importer).

Importing the named module runs the user's own code, which is what they ask for here; any
failure becomes an :class:`ImportProblem` with a message for the dialog, never a traceback.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

from graph_editor.model import Graph, GraphError


class ImportProblem(Exception):
    """Why a module could not be imported as a graph."""


def load_factory(spec: str) -> Any:
    """Call ``MODULE:FACTORY`` and return its result (the current folder is importable)."""
    module_name, sep, attr = spec.strip().partition(":")
    if not sep or not module_name or not attr:
        raise ImportProblem(f"'{spec}' is not MODULE:FACTORY, e.g. torchvision.models:resnet18")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # the user's module may fail in any way while importing
        raise ImportProblem(f"cannot import {module_name}: {type(exc).__name__}: {exc}") from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise ImportProblem(f"{module_name} has no callable '{attr}'")
    try:
        return factory()
    except Exception as exc:
        raise ImportProblem(f"{spec}() failed: {type(exc).__name__}: {exc}") from None


def import_graph(spec: str, input_shape: tuple[int, ...] | None, num_classes: int | None = None) -> Graph:
    """The graph of the module ``spec`` builds, for per-sample ``input_shape`` (guessed when None)."""
    from torch import nn

    from graph_editor.build.importer import guess_input_shape, import_module

    module = load_factory(spec)
    if not isinstance(module, nn.Module):
        raise ImportProblem(f"{spec}() returned {type(module).__name__}, not a torch.nn.Module")
    shape = input_shape or guess_input_shape(module)
    if not shape:
        raise ImportProblem("give the per-sample input shape, e.g. 3, 32, 32")
    try:
        return import_module(module, shape, num_classes, name=spec.partition(":")[2]).graph
    except GraphError as exc:
        raise ImportProblem(str(exc)) from None
