"""``MODULE:FACTORY`` -> an imported graph: what ``torch-studio import`` and the studio's
Import Module dialog both do.

Importing the named module runs the user's own code, which is what they ask for here; any
failure becomes one :class:`ModuleImportError` with a message, never a traceback.
"""

from __future__ import annotations

import importlib
import os
import sys

from torch import nn

from .capture import without_cuda
from .module_import import ImportResult, ModuleImportError, guess_input_shape, import_module
from .pretrained import load_weights


def load_factory(spec: str) -> object:
    """Call ``MODULE:FACTORY`` with no arguments (the current folder is importable, as with ``python -m``)."""
    module_name, sep, attr = spec.strip().partition(":")
    if not sep or not module_name or not attr:
        raise ModuleImportError([], f"'{spec}' is not MODULE:FACTORY, e.g. mypackage.models:make_net")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except SystemExit as exc:  # a script's sys.exit() at import: not a module to import, and not our exit
        raise ModuleImportError([], f"cannot import {module_name}: it called sys.exit({exc.code!r}) while "
                                    "being imported") from None
    except Exception as exc:  # the user's module may fail in any way while importing
        raise ModuleImportError([], f"cannot import {module_name}: {type(exc).__name__}: {exc}") from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise ModuleImportError([], f"{module_name} has no function '{attr}'")
    try:
        with without_cuda():  # model.cuda() in a factory written for a GPU machine
            return factory()
    except SystemExit as exc:  # the factory ended the process's way, not with a module: say so
        raise ModuleImportError([], f"{spec}() called sys.exit({exc.code!r}) instead of returning a module") from None
    except Exception as exc:
        raise ModuleImportError([], f"{spec}() failed: {type(exc).__name__}: {exc}") from None


def import_factory(spec: str, input_shape: tuple[int, ...] | None = None, num_classes: int | None = None,
                   shape_hint: str = "e.g. 3,32,32", strict: bool = False, weights: str = "") -> ImportResult:
    """Import the module ``spec`` builds, for per-sample ``input_shape`` (guessed when None).

    ``shape_hint`` says how to give the shape where it cannot be guessed (a CLI flag, a field);
    ``strict`` refuses what does not map instead of keeping it as Module nodes; ``weights`` loads a
    weights file (or ``"cache"``: torch hub's or Hugging Face's local cache) into the module first
    (:mod:`.pretrained`; nothing is downloaded).
    """
    module = load_factory(spec)
    if not isinstance(module, nn.Module):
        raise ModuleImportError([], f"{spec}() returned {type(module).__name__}, not a torch.nn.Module")
    name = spec.partition(":")[2]
    source = str(load_weights(module, weights, name)) if weights else ""
    shape = input_shape or guess_input_shape(module)
    if not shape:
        raise ModuleImportError([], f"give the per-sample input shape, {shape_hint}")
    result = import_module(module, shape, num_classes, name=name, strict=strict)
    result.weights_from = source
    return result
