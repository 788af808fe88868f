"""The opaque Module node: a whole ``nn.Module`` of a class the catalog has no layer for.

The importer keeps what it cannot map as one such node instead of failing. The node names the
class (``package.module:Class``) and its constructor arguments (JSON keyword arguments); the
weights travel like every other node's. This side is pure Python and cannot run the module, so
the shapes the module was imported with are kept on the node: its input must have that
per-sample shape, and its output is the recorded one. The PyTorch side
(:mod:`graph_editor.building.ops.module_ref`) imports the class, constructs it, checks the recorded
output shape on the ``meta`` device and counts its FLOPs there.
"""

from __future__ import annotations

import json
import re

from ..catalog import Params, ParamSpec, Shape, fmt_shape, layer
from ..errors import ParamError, ShapeError

CAT = "Imported"
_CLASS = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


def parse_class(ref: str) -> tuple[str, str]:
    """``'package.module:Class'`` -> ``('package.module', 'Class')``; ParamError for anything else."""
    if not isinstance(ref, str) or not _CLASS.match(ref.strip()):
        raise ParamError(f"cls must name a class as package.module:Class, got {ref!r}", field="cls")
    module, _, name = ref.strip().partition(":")
    return module, name


def parse_kwargs(text: str) -> dict[str, object]:
    """The node's constructor arguments: a JSON object of literal values (ParamError otherwise)."""
    try:
        value = json.loads(text or "{}")
    except ValueError as exc:
        raise ParamError(f"kwargs is not JSON: {exc}", field="kwargs") from None
    if not isinstance(value, dict):
        raise ParamError(f"kwargs must be a JSON object of constructor arguments, got {text[:60]!r}",
                         field="kwargs")
    return value


@layer("Module", CAT, "An imported nn.Module kept whole: a class the catalog has no layer for, built by "
       "importing and constructing it. Its shapes are the ones it was imported with.", [
           ParamSpec("cls", "str", "", "The class, as package.module:Class."),
           ParamSpec("kwargs", "str", "{}", "Constructor arguments, a JSON object."),
           ParamSpec("in_shape", "ints", [], "Per-sample input shape it was imported for (empty: any).",
                     minimum=1, optional=True),
           ParamSpec("out_shape", "ints", [], "Per-sample output shape, recorded on import.", minimum=1,
                     optional=True),
       ], prefix="module", key_params=("cls",))
def module_ref(p: Params, xs: list[Shape]) -> Shape:
    (x,) = xs
    try:
        parse_class(p["cls"])
        parse_kwargs(p["kwargs"])
    except ParamError as exc:  # the rule may only raise ShapeError; the message names the field
        raise ShapeError(exc.message) from None
    expected = p["in_shape"]
    if expected and list(x[1:]) != list(expected):
        raise ShapeError(f"{p['cls']} was imported for input {fmt_shape((0, *expected))}, receives "
                         f"{fmt_shape(x)}")
    if not p["out_shape"]:
        raise ShapeError(f"{p['cls']} has no recorded output shape (out_shape); import the module to record it")
    return (x[0], *p["out_shape"])
