"""Readable PyTorch source for a built graph: each module written as the constructor call that built it.

The writer is derived from the builders (:mod:`graph_editor.building.ops`): every module the studio
builds remembers its constructor call, so ``model.py`` constructs each layer exactly as the studio
did. The graph's own layer classes are written by name and their class source is copied into the
file, so the result needs only torch. A module the studio did not build (of any class) cannot be
written and gives an ExportError naming its node.
"""

from __future__ import annotations

import inspect
import sys

from torch import nn

from graph_editor.building.modules import built_call, is_own_class


def constructor(module: nn.Module) -> str | None:
    """Python source that constructs an equal module (same class and hyper-parameters), or None.

    Raises ValueError when the call holds a value that is not a Python literal.
    """
    call = built_call(module)
    return call.source() if call is not None else None


def import_line(module: nn.Module) -> str | None:
    """The import a Module node's class needs in model.py (``from package.module import Class``), or None."""
    line = getattr(built_call(module), "import_line", None)
    return line() if callable(line) else None


def local_class_source(module: nn.Module) -> str | None:
    """The source of the graph's own layer class used by ``module`` (copied into model.py), or None; preceded by
    the functions, classes and constants of its module that the class names in ``model_py_helpers`` (a Constant
    node's decoder, a Program node's loader), so that model.py runs with torch and safetensors alone."""
    cls = type(module)
    if not is_own_class(cls):
        return None
    home = sys.modules[cls.__module__]
    parts = []
    for name in getattr(cls, "model_py_helpers", ()):
        helper = getattr(home, name)
        parts.append(f"{name} = {helper!r}" if isinstance(helper, int | float | str) else
                     inspect.getsource(helper).rstrip())  # a function (with its decorators) or a class
    return "\n\n\n".join([*parts, inspect.getsource(cls).rstrip()]) + "\n"


def support_imports(module: nn.Module) -> list[str]:
    """The import lines the copied class of ``module`` and its helpers need (``model_py_imports``)."""
    return list(getattr(type(module), "model_py_imports", ())) if is_own_class(type(module)) else []
