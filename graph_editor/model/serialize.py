"""Graph files (``*.graph.json``): versioned, migrated on load, written atomically.

Loading is all-or-nothing: any problem raises one :class:`GraphFileError` that names the
file, the node and the field at fault, and no graph is returned half-built.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .catalog import get_layer
from .errors import GraphError, GraphFileError, ParamError
from .graph import DTYPES, ID_RE, Edge, Graph, Group, InputSpec

SCHEMA_VERSION = 2
SUFFIX = ".graph.json"

_TOP_FIELDS = {"schema_version", "name", "input", "num_classes", "nodes", "edges", "groups", "metadata"}
_NODE_FIELDS = {"id", "type", "params", "position", "label"}
_EDGE_FIELDS = {"src", "src_port", "dst", "dst_port"}


def graph_to_dict(graph: Graph) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "input": {"shape": list(graph.input_spec.shape), "dtype": graph.input_spec.dtype},
        "num_classes": graph.num_classes,
        "nodes": [
            {"id": n.id, "type": n.type, "params": _jsonable(n.params), "position": list(n.position),
             **({"label": n.label} if n.label else {})}
            for n in graph
        ],
        "edges": [{"src": e.src, "src_port": e.src_port, "dst": e.dst, "dst_port": e.dst_port}
                  for e in graph.edges],
        "groups": [{"id": g.id, "name": g.name, "nodes": list(g.nodes), "collapsed": g.collapsed}
                   for g in graph.groups.values()],
        "metadata": graph.metadata,
    }


def _jsonable(params: dict[str, Any]) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in params.items()}


_SHORT_LIST = re.compile(r"\[\s+([^\[\]{}\"]*?)\s+\]")


def dumps(graph: Graph) -> str:
    """Indented JSON with lists of numbers (shapes, kernel sizes, positions) kept on one line."""
    text = json.dumps(graph_to_dict(graph), indent=1)
    return _SHORT_LIST.sub(lambda m: "[" + ", ".join(v.strip() for v in m.group(1).split(",")) + "]", text)


def save_graph(graph: Graph, path: str | os.PathLike[str]) -> None:
    """Write atomically: a temporary file beside the target, then a rename over it."""
    atomic_write_text(Path(path), dumps(graph) + "\n")


def atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_graph(path: str | os.PathLike[str]) -> Graph:
    """Read a graph file, migrating older schema versions; raises GraphFileError."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise GraphFileError("file not found", path=str(p)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise GraphFileError(f"cannot read the file ({exc})", path=str(p)) from None
    try:
        return loads(text)
    except GraphFileError as exc:
        exc.path = str(p)
        exc.args = (exc.located(),)
        raise


def loads(text: str) -> Graph:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        what = "truncated" if exc.pos >= len(text.rstrip()) else "not valid JSON"
        raise GraphFileError(f"{what}: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    return graph_from_dict(data)


# ------------------------------------------------------------------ migrations
Migration = Callable[[dict[str, Any]], dict[str, Any]]
MIGRATIONS: dict[int, Migration] = {}


def migration(from_version: int) -> Callable[[Migration], Migration]:
    def deco(fn: Migration) -> Migration:
        MIGRATIONS[from_version] = fn
        return fn
    return deco


@migration(1)
def _v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """Version 1 kept the input shape at top level and edges as "a.out -> b.in" strings."""
    out = {k: v for k, v in data.items() if k not in ("input_shape", "input_dtype", "edges")}
    out["input"] = {"shape": data.get("input_shape", [1, 28, 28]), "dtype": data.get("input_dtype", "float32")}
    edges = []
    if not isinstance(data.get("edges", []), list):
        raise GraphFileError("must be a list of 'node.port -> node.port' strings", field="edges")
    for i, text in enumerate(data.get("edges", [])):
        try:
            left, right = (s.strip() for s in str(text).split("->"))
            (src, src_port), (dst, dst_port) = left.split("."), right.split(".")
        except ValueError:
            raise GraphFileError(f"edge {i} ({text!r}) is not 'node.port -> node.port'", field=f"edges[{i}]") from None
        edges.append({"src": src, "src_port": src_port, "dst": dst, "dst_port": dst_port})
    out["edges"] = edges
    out["schema_version"] = 2
    return out


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise GraphFileError(f"schema_version must be an integer, got {version!r}", field="schema_version")
    if version > SCHEMA_VERSION:
        raise GraphFileError(f"schema_version {version} is newer than this Torch Studio reads ({SCHEMA_VERSION}); "
                             "update Torch Studio", field="schema_version")
    if version < 1:
        raise GraphFileError(f"schema_version {version} is not a known version", field="schema_version")
    while version < SCHEMA_VERSION:
        data = MIGRATIONS[version](data)
        version = data["schema_version"]
    return data


# ------------------------------------------------------------------ decoding
def graph_from_dict(data: Any) -> Graph:
    """Build a Graph from decoded JSON, or raise one GraphFileError naming node and field."""
    if not isinstance(data, dict):
        raise GraphFileError(f"the file must hold a JSON object, not {type(data).__name__}")
    if "schema_version" not in data:
        raise GraphFileError("missing schema_version: this is not a Torch Studio graph file", field="schema_version")
    data = migrate(data)
    _no_unknown(data, _TOP_FIELDS, None, "")
    inp = _get(data, "input", dict, None, "input")
    shape = _get(inp, "shape", list, None, "input.shape")
    if not shape or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape):
        raise GraphFileError(f"must be a list of positive integers, got {shape!r}", field="input.shape")
    dtype = inp.get("dtype", "float32")
    if dtype not in DTYPES:
        raise GraphFileError(f"must be one of {', '.join(DTYPES)}, got {dtype!r}", field="input.dtype")
    _no_unknown(inp, {"shape", "dtype"}, None, "input.")
    num_classes = _get(data, "num_classes", int, None, "num_classes")
    if num_classes < 1:
        raise GraphFileError(f"must be at least 1, got {num_classes}", field="num_classes")
    metadata = data.get("metadata", {})
    if not isinstance(metadata, dict):
        raise GraphFileError("must be an object", field="metadata")
    if "name" in data:
        metadata = {"name": data["name"], **metadata}

    graph = Graph(InputSpec(tuple(shape), dtype), num_classes, metadata)
    for i, raw in enumerate(_get(data, "nodes", list, None, "nodes")):
        _decode_node(graph, raw, i)
    for i, raw in enumerate(_get({"edges": [], **data}, "edges", list, None, "edges")):
        _decode_edge(graph, raw, i)
    groups: dict[str, Group] = {}
    for i, raw in enumerate(_get({"groups": [], **data}, "groups", list, None, "groups")):
        g = _decode_group(graph, raw, i)
        if g.id in groups:
            raise GraphFileError(f"the group id '{g.id}' is used twice", field=f"groups[{i}].id")
        owner = next((o for o in groups.values() for n in g.nodes if n in o.nodes), None)
        if owner is not None:
            node = next(n for n in g.nodes if n in owner.nodes)
            raise GraphFileError(f"is in two groups ('{owner.name}' and '{g.name}')", node=node,
                                 field=f"groups[{i}].nodes")
        groups[g.id] = g
    graph.groups = groups
    return graph


def _decode_node(graph: Graph, raw: Any, i: int) -> None:
    where = f"nodes[{i}]"
    if not isinstance(raw, dict):
        raise GraphFileError("must be an object", field=where)
    node_id = raw.get("id")
    if not isinstance(node_id, str) or not ID_RE.match(node_id):
        raise GraphFileError(f"id must be a Python identifier, got {node_id!r}", field=f"{where}.id")
    _no_unknown(raw, _NODE_FIELDS, node_id, "")
    if node_id in graph.nodes:
        raise GraphFileError("the id is used by two nodes", node=node_id, field="id")
    type_ = _get(raw, "type", str, node_id, "type")
    params = dict(raw.get("params", {})) if isinstance(raw.get("params", {}), dict) else None
    if params is None:
        raise GraphFileError("must be an object", node=node_id, field="params")
    spec = get_layer(type_)
    if spec is not None:
        # Types and unknown names are file errors; out-of-range values load and validation reports them.
        for name, value in params.items():
            if not spec.has_param(name):
                raise GraphFileError(f"{type_} has no parameter '{name}'", node=node_id, field=f"params.{name}")
            params[name] = _check_param_type(spec.param(name), value, node_id)
        params = {**spec.defaults(), **params}
    pos = raw.get("position", [0, 0])
    if not (isinstance(pos, list) and len(pos) == 2 and all(
            isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in pos)):
        raise GraphFileError(f"must be [x, y], got {pos!r}", node=node_id, field="position")
    label = raw.get("label", "")
    if not isinstance(label, str):
        raise GraphFileError("must be text", node=node_id, field="label")
    graph.add_node(type_, node_id, params, (pos[0], pos[1]), label, check=False)


def _check_param_type(spec, value: Any, node_id: str) -> Any:
    """Reject a value of the wrong JSON type and normalise the rest; bounds are left to validation."""
    relaxed = type(spec)(**{**spec.__dict__, "minimum": None, "maximum": None,
                            "choices": spec.choices if spec.kind != "choice" else ()})
    if spec.kind == "choice":
        if not isinstance(value, str | int | float):
            raise GraphFileError(f"must be one of {list(spec.choices)}, got {value!r}", node=node_id,
                                 field=f"params.{spec.name}")
        return value
    try:
        return relaxed.check(value)
    except ParamError as exc:
        raise GraphFileError(exc.message, node=node_id, field=f"params.{spec.name}") from None


def _decode_edge(graph: Graph, raw: Any, i: int) -> None:
    where = f"edges[{i}]"
    if not isinstance(raw, dict):
        raise GraphFileError("must be an object", field=where)
    _no_unknown(raw, _EDGE_FIELDS, None, f"{where}.")
    src = _get(raw, "src", str, None, f"{where}.src")
    dst = _get(raw, "dst", str, None, f"{where}.dst")
    for end, name in (("src", src), ("dst", dst)):
        if name not in graph.nodes:
            raise GraphFileError(f"{end} names node '{name}', which does not exist", node=name,
                                 field=f"{where}.{end}")
    edge = Edge(src, dst, raw.get("src_port", "out"), raw.get("dst_port", "in"))
    if not isinstance(edge.src_port, str) or not isinstance(edge.dst_port, str):
        raise GraphFileError("ports must be text", field=where)
    for node_id, port, side in ((src, edge.src_port, "output"), (dst, edge.dst_port, "input")):
        spec = graph.nodes[node_id].spec
        if spec is not None:
            ports = spec.outputs if side == "output" else spec.inputs
            if all(p.name != port for p in ports):
                raise GraphFileError(f"{spec.type} has no {side} port '{port}' ({where})", node=node_id,
                                     field=f"{'src' if side == 'output' else 'dst'}_port")
    if edge in graph.edges:
        raise GraphFileError(f"edge {edge} appears twice", field=where)
    try:
        graph.add_edge(edge, check=False)
    except GraphError as exc:
        raise GraphFileError(exc.message, node=exc.node, field=where) from None


def _decode_group(graph: Graph, raw: Any, i: int) -> Group:
    where = f"groups[{i}]"
    if not isinstance(raw, dict):
        raise GraphFileError("must be an object", field=where)
    _no_unknown(raw, {"id", "name", "nodes", "collapsed"}, None, f"{where}.")
    gid = _get(raw, "id", str, None, f"{where}.id")
    name = _get(raw, "name", str, None, f"{where}.name")
    nodes = _get(raw, "nodes", list, None, f"{where}.nodes")
    missing = [n for n in nodes if not isinstance(n, str) or n not in graph.nodes]
    if missing:
        raise GraphFileError(f"group '{name}' names node '{missing[0]}', which does not exist", field=f"{where}.nodes")
    collapsed = raw.get("collapsed", True)
    if not isinstance(collapsed, bool):
        raise GraphFileError("must be true or false", field=f"{where}.collapsed")
    return Group(gid, name, list(nodes), collapsed)


def _get(obj: dict[str, Any], key: str, kind: type, node: str | None, field: str) -> Any:
    if key not in obj:
        raise GraphFileError("is missing", node=node, field=field)
    value = obj[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise GraphFileError(f"must be {_KIND_NAMES[kind]}, got {value!r}", node=node, field=field)
    return value


_KIND_NAMES = {dict: "an object", list: "a list", str: "text", int: "an integer"}


def _no_unknown(obj: dict[str, Any], known: set[str], node: str | None, prefix: str) -> None:
    extra = sorted(set(obj) - known)
    if extra:
        raise GraphFileError(f"unknown field (expected one of {', '.join(sorted(known))})", node=node,
                             field=prefix + extra[0])
