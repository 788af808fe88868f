"""The exported-program node: an imported piece of a network kept as its own ``torch.export`` program.

What the catalog cannot express is imported as one such node instead of being guessed from
constructor arguments: the node holds the submodule's ExportedProgram (its graph of ATen ops and
its constant tensors, encoded as text in ``program``, checked against ``sha256``), its weights
travel like every other node's, and it takes and gives any number of tensors. Nothing in it runs
Python code of the module it came from; loading it deserialises a graph.

This side is pure Python and cannot run the program, so the per-sample shapes it was captured with
are kept on the node: its inputs must have those shapes (the batch may differ), and its outputs are
the recorded ones. The PyTorch side is :mod:`graph_editor.building.ops.program`.
"""

from __future__ import annotations

import json
import re

from ..catalog import Params, ParamSpec, PortSpec, Shape, fmt_shape, layer
from ..errors import ParamError, ShapeError

CAT = "Imported"
TYPE = "Program"
_SHA = re.compile(r"^[0-9a-f]{64}$")


def parse_shapes(text: str, field: str) -> list[list[int]]:
    """``'[[3, 32, 32], [10]]'`` -> per-sample shapes; ParamError naming ``field`` for anything else."""
    try:
        value = json.loads(text or "[]")
    except ValueError as exc:
        raise ParamError(f"{field} is not JSON: {exc}", field=field) from None
    if not isinstance(value, list) or not value or not all(
            isinstance(s, list) and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in s)
            for s in value):
        raise ParamError(f"{field} must be a JSON list of per-sample shapes such as [[3, 32, 32]], got "
                         f"{text[:60]!r}", field=field)
    return value


def _output_count(p: dict[str, object]) -> int:
    return len(parse_shapes(str(p["out_shapes"]), "out_shapes"))


@layer(TYPE, CAT, "An imported piece of a network that no catalog layer expresses, kept as its own "
       "torch.export program (a graph of ATen ops, no Python code of its own) with its weights; it takes "
       "and gives the tensors it was captured with. It runs as it was captured (evaluation mode: dropout "
       "off, batch norm on its running statistics).", [
           ParamSpec("program", "str", "", "The ExportedProgram, encoded (graph and constant tensors; the "
                     "weights are the node's own)."),
           ParamSpec("sha256", "str", "", "SHA-256 of program, checked when it is loaded."),
           ParamSpec("source", "str", "", "What it was captured from: module path and class."),
           ParamSpec("in_shapes", "str", "[[1]]", "Per-sample shape of each input, a JSON list of lists."),
           ParamSpec("out_shapes", "str", "[[1]]", "Per-sample shape of each output, a JSON list of lists."),
       ], inputs=(PortSpec("in", variadic=True, doc="The program's tensor inputs, in order."),),
       prefix="program", key_params=("source",), output_count=_output_count)
def program(p: Params, xs: list[Shape]) -> list[Shape]:
    try:
        ins = parse_shapes(p["in_shapes"], "in_shapes")
        outs = parse_shapes(p["out_shapes"], "out_shapes")
    except ParamError as exc:  # the rule may only raise ShapeError; the message names the field
        raise ShapeError(exc.message, field=exc.field) from None
    if not _SHA.match(p["sha256"]):
        raise ShapeError("sha256 must be 64 lowercase hex digits (the program's hash)", field="sha256")
    if len(xs) != len(ins):
        raise ShapeError(f"the program takes {len(ins)} input(s), {len(xs)} wired")
    batch = xs[0][0]
    for i, (x, want) in enumerate(zip(xs, ins, strict=True)):
        if list(x[1:]) != want or x[0] != batch:
            raise ShapeError(f"input {i} was captured as {fmt_shape((batch, *want))}, receives {fmt_shape(x)}")
    return [(batch, *s) for s in outs]
