"""Which submodules the importer keeps whole, as Program nodes, when ops inside them do not map.

The importer first converts what fx traced. Each op it cannot map lies inside some module's
``forward`` (fx's ``nn_module_stack``); :func:`widen` makes the smallest such enclosing module a
leaf, so that the next trace calls it as one ``call_module`` and the importer keeps it as one
Program node, its own exported program (:mod:`graph_editor.importer.capture`). A module that cannot
be one either (torch.export cannot capture it, it returns a nested structure or an output that does not
lead with the batch) widens to the module around it. Ops in the root module's own ``forward`` have no
module around them: the whole model is then one Program node (:func:`~.import_capture.whole_program`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from torch import fx


def widen(gm: fx.GraphModule, unsupported: Iterable[Any], leaves: frozenset[str]) -> frozenset[str] | None:
    """The module paths to keep whole on the next trace, or None when some unmapped op has no
    enclosing module (besides the root) to keep instead: the import error then stands."""
    by_name = {n.name: n for n in gm.graph.nodes}
    out = set(leaves)
    for problem in unsupported:
        n = by_name.get(problem.node)
        path = _enclosing(n) if n is not None else ""
        if not path:
            return None
        out = {p for p in out if not p.startswith(path + ".")} | {path}
    wider = frozenset(out)
    return wider if wider != leaves else None


def _enclosing(n: fx.Node) -> str:
    """The innermost module (not the root) whose ``forward`` made ``n``, other than ``n``'s own target."""
    stack = [str(v[0]) for v in (n.meta.get("nn_module_stack") or {}).values()]
    own = str(n.target) if n.op == "call_module" else None
    if n.op == "get_attr" and not stack:  # a parameter read: the module that holds it
        stack = [str(n.target).rpartition(".")[0]]
    if n.op == "call_module" and not stack:
        stack = [own.rpartition(".")[0]] if own else []
    paths = [p for p in stack if p and p != own]
    return paths[-1] if paths else ""
