"""Graph files (``*.graph.json``): versioned, migrated on load, written atomically.

Loading is all-or-nothing: any problem raises one :class:`GraphFileError` that names the
file, the node and the field at fault, and no graph is returned half-built.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from .catalog import INT_LIMIT, ParamSpec, get_layer, short_repr
from .errors import GraphFileError, ParamError
from .graph import DTYPES, ID_RE, Edge, Graph, Group, InputSpec, Node
from .hierarchy import nesting_problem
from .registry import Registry
from .repeat import group_repeat

SCHEMA_VERSION = 3
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
        "groups": [{"id": g.id, "name": g.name, "nodes": list(g.nodes), "collapsed": g.collapsed,
                    **({"kind": g.kind} if g.kind else {}), **({"repeat": g.repeat} if g.repeat != 1 else {})}
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
    """Write ``path`` through a temporary file and a rename. The file gets the mode a plain ``open``
    would give it (the one it had, else 0666 less the umask), not mkstemp's private 0600."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, _mode_for(path))
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _mode_for(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        return 0o666 & ~current_umask()


def current_umask() -> int:
    """The process's umask, read without changing it where the system allows (os.umask would change
    it for a moment for every thread: a file another thread creates then gets mode 0666)."""
    try:                        # Linux says it without changing it (os.umask would, for every thread)
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


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
    return graph_from_dict(parse_json(text))


# Deeper than any graph file needs (the deepest field is a node's params list: 4 levels), far below
# the interpreter's recursion limit that the JSON decoder would otherwise hit.
MAX_DEPTH = 64
MAX_ID_CHARS = 200   # a node id is named in every message about its node
_LONG_INT = re.compile(r"-?\d{4000,}")


def parse_json(text: str, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads`` for files from anywhere: every way it can fail is a :class:`GraphFileError` that
    says where (nesting too deep, an integer of thousands of digits), never a RecursionError.
    (Nesting that the decoder survives is refused by :func:`graph_from_dict`.)"""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        what = "truncated" if exc.pos >= len(text.rstrip()) else "not valid JSON"
        raise GraphFileError(f"{what}: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    except RecursionError:
        depth, line = json_depth(text, max_depth)
        raise GraphFileError(f"nested {depth} levels deep from line {line} on (at most {max_depth}): "
                             "this is not a graph file") from None
    except ValueError as exc:  # the interpreter's limit on digits in an integer
        m = _LONG_INT.search(text)
        if m is None:
            raise GraphFileError(f"not valid JSON: {exc}") from None
        line = text.count("\n", 0, m.start()) + 1
        column = m.start() - (text.rfind("\n", 0, m.start()) + 1) + 1
        raise GraphFileError(f"a number of {len(m.group().lstrip('-'))} digits at line {line}, column {column} "
                             "(numbers in a graph file are sizes and coordinates)") from None


def json_depth(text: str, limit: int = MAX_DEPTH) -> tuple[int, int]:
    """The deepest nesting of ``[`` and ``{`` in JSON text (strings skipped; linear, no recursion) and
    the line where it first goes deeper than ``limit`` (0 if it never does)."""
    depth = deepest = 0
    line = 0
    # Strings hold no structure; matching them whole (escapes included) leaves only brackets that count.
    for m in _BRACKETS.finditer(text):
        c = m.group()[0]
        if c in "[{":
            depth += 1
            deepest = max(deepest, depth)
            if depth > limit and not line:
                line = text.count("\n", 0, m.start()) + 1
        elif c in "]}":
            depth -= 1
    return deepest, line


def _not_too_deep(value: Any, node: str | None, field: str) -> None:
    """Free-form values (metadata, params of an unknown layer type) are the only place a decodable
    file can nest deeply enough to break whatever walks it next (a copy, a save)."""
    if value_depth(value) > MAX_DEPTH:
        raise GraphFileError(f"nested more than {MAX_DEPTH} levels deep", node=node, field=field)


def value_depth(value: Any) -> int:
    """The nesting depth of decoded JSON (a scalar is 0), without recursion; stops counting past
    ``MAX_DEPTH``."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict | list):
            deepest = max(deepest, d)
            if d <= MAX_DEPTH:
                stack.extend((c, d + 1) for c in (v.values() if isinstance(v, dict) else v)
                             if isinstance(c, dict | list))
    return deepest


_BRACKETS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


# ------------------------------------------------------------------ migrations
Migration = Callable[[dict[str, Any]], dict[str, Any]]
MIGRATIONS: Registry[int, Migration] = Registry("the schema migration")   # from version N to N + 1


def migration(from_version: int) -> Callable[[Migration], Migration]:
    def deco(fn: Migration) -> Migration:
        return MIGRATIONS.add(from_version, fn)
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
            raise GraphFileError(f"edge {i} ({short_repr(text)}) is not 'node.port -> node.port'", field=f"edges[{i}]") from None
        edges.append({"src": src, "src_port": src_port, "dst": dst, "dst_port": dst_port})
    out["edges"] = edges
    out["schema_version"] = 2
    return out


@migration(2)
def _v2_to_v3(data: dict[str, Any]) -> dict[str, Any]:
    """Version 3 lets groups nest (a group holding all of another's nodes is its parent) and
    gives them a ``kind``; version-2 groups never overlap, so they read unchanged."""
    return {**data, "schema_version": 3}


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise GraphFileError(f"schema_version must be an integer, got {short_repr(version)}", field="schema_version")
    if version > SCHEMA_VERSION:
        raise GraphFileError(f"schema_version {short_repr(version)} is newer than this Torch Studio reads ({SCHEMA_VERSION}); "
                             "update Torch Studio", field="schema_version")
    if version < 1:
        raise GraphFileError(f"schema_version {short_repr(version)} is not a known version", field="schema_version")
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
    if not shape or not all(isinstance(d, int) and not isinstance(d, bool) and 0 < d <= INT_LIMIT for d in shape):
        raise GraphFileError(f"must be a list of positive integers up to {INT_LIMIT:,}, got {short_repr(shape)}",
                             field="input.shape")
    dtype = inp.get("dtype", "float32")
    if dtype not in DTYPES:
        raise GraphFileError(f"must be one of {', '.join(DTYPES)}, got {short_repr(dtype)}", field="input.dtype")
    _no_unknown(inp, {"shape", "dtype"}, None, "input.")
    num_classes = _get(data, "num_classes", int, None, "num_classes")
    if not 1 <= num_classes <= INT_LIMIT:
        raise GraphFileError(f"must be at least 1 and at most {INT_LIMIT:,}, got {short_repr(num_classes)}", field="num_classes")
    metadata = data.get("metadata", {})
    if not isinstance(metadata, dict):
        raise GraphFileError("must be an object", field="metadata")
    _not_too_deep(metadata, None, "metadata")
    if "name" in data:
        metadata = {"name": data["name"], **metadata}

    graph = Graph(InputSpec(tuple(shape), dtype), num_classes, metadata)
    for i, raw in enumerate(_get(data, "nodes", list, None, "nodes")):
        _decode_node(graph, raw, i)
    seen: set[Edge] = set()
    for i, raw in enumerate(_get({"edges": [], **data}, "edges", list, None, "edges")):
        _decode_edge(graph, raw, i, seen)
    groups: dict[str, Group] = {}
    for i, raw in enumerate(_get({"groups": [], **data}, "groups", list, None, "groups")):
        g = _decode_group(graph, raw, i)
        if g.id in groups:
            raise GraphFileError(f"the group id '{g.id}' is used twice", field=f"groups[{i}].id")
        groups[g.id] = g
    problem = nesting_problem(groups.values())
    if problem:
        where = list(groups).index(problem.group.id)
        raise GraphFileError(problem.message, node=problem.node, field=f"groups[{where}].nodes")
    graph.groups = groups
    return graph


def _decode_node(graph: Graph, raw: Any, i: int) -> None:
    if not isinstance(raw, dict):
        raise GraphFileError("must be an object", field=f"nodes[{i}]")
    node_id = raw.get("id")
    if not isinstance(node_id, str) or not ID_RE.match(node_id) or len(node_id) > MAX_ID_CHARS:
        raise GraphFileError(f"id must be a Python identifier of at most {MAX_ID_CHARS} characters, got "
                             f"{short_repr(node_id)}", field=f"nodes[{i}].id")
    _no_unknown(raw, _NODE_FIELDS, node_id, "")
    if node_id in graph.nodes:
        raise GraphFileError("the id is used by two nodes", node=node_id, field="id")
    type_ = _get(raw, "type", str, node_id, "type")
    params = raw.get("params", {})
    if not isinstance(params, dict):
        raise GraphFileError("must be an object", node=node_id, field="params")
    spec = get_layer(type_)
    if spec is not None:
        # Types and unknown names are file errors; out-of-range values load and validation reports them.
        checked = spec.defaults()
        for name, value in params.items():
            if not spec.has_param(name):
                raise GraphFileError(f"{type_} has no parameter {short_repr(name)}", node=node_id,
                                     field=f"params.{name}")
            checked[name] = _check_param_type(spec.param(name), value, node_id)
        params = checked
    else:  # kept as they are for validation to report the type: free-form, so bounded here
        _not_too_deep(params, node_id, "params")
        params = dict(params)
    pos = raw.get("position", [0, 0])
    if not (type(pos) is list and len(pos) == 2 and _coordinate(pos[0]) and _coordinate(pos[1])):
        raise GraphFileError(f"must be [x, y] (finite coordinates), got {short_repr(pos)}", node=node_id,
                             field="position")
    label = raw.get("label", "")
    if not isinstance(label, str):
        raise GraphFileError("must be text", node=node_id, field="label")
    # Straight into the new graph: nothing can be listening to a graph this function is still building.
    graph.nodes[node_id] = Node(node_id, type_, params, (float(pos[0]), float(pos[1])), label)


def _coordinate(v: Any) -> bool:
    return (type(v) is float or type(v) is int) and abs(v) <= 1e15  # NaN compares False


def _check_param_type(spec, value: Any, node_id: str) -> Any:
    """Reject a value of the wrong JSON type and normalise the rest; bounds are left to validation."""
    if spec.kind == "choice":
        if not isinstance(value, str | int | float):
            raise GraphFileError(f"must be one of {list(spec.choices)}, got {short_repr(value)}", node=node_id,
                                 field=f"params.{spec.name}")
        return value
    try:
        return _relaxed(spec).check(value)
    except ParamError as exc:
        raise GraphFileError(exc.message, node=node_id, field=f"params.{spec.name}") from None


_RELAXED: dict[int, ParamSpec] = {}


def _relaxed(spec: ParamSpec) -> ParamSpec:
    """``spec`` without its bounds (made once per catalog parameter: loading calls this per value)."""
    relaxed = _RELAXED.get(id(spec))
    if relaxed is None or relaxed.name != spec.name:
        relaxed = _RELAXED[id(spec)] = replace(spec, minimum=None, maximum=None)
    return relaxed


def _decode_edge(graph: Graph, raw: Any, i: int, seen: set[Edge]) -> None:
    # The common case checked inline (a 20000-node file has 20000 edges); anything unusual takes the
    # slow path below, which names what is wrong.
    if type(raw) is dict and raw.keys() <= _EDGE_FIELDS:
        src, dst = raw.get("src"), raw.get("dst")
        src_port, dst_port = raw.get("src_port", "out"), raw.get("dst_port", "in")
        a, b = graph.nodes.get(src) if type(src) is str else None, graph.nodes.get(dst) if type(dst) is str else None
        if (a is not None and b is not None and isinstance(src, str) and isinstance(dst, str)
                and type(src_port) is str and type(dst_port) is str):
            sa, sb = get_layer(a.type), get_layer(b.type)
            if (sa is None or sa.has_output(src_port)) and (sb is None or dst_port in sb.input_names):
                edge = Edge(src, dst, src_port, dst_port)
                if edge not in seen:  # a set: a list's `in` made loading quadratic in the edge count
                    seen.add(edge)
                    graph.edges.append(edge)   # as for nodes: a graph being built has no listeners
                    return
    _refuse_edge(graph, raw, i, seen)


def _refuse_edge(graph: Graph, raw: Any, i: int, seen: set[Edge]) -> None:
    if not isinstance(raw, dict):
        raise GraphFileError("must be an object", field=f"edges[{i}]")
    _no_unknown(raw, _EDGE_FIELDS, None, f"edges[{i}].")
    src = _get(raw, "src", str, None, f"edges[{i}].src")
    dst = _get(raw, "dst", str, None, f"edges[{i}].dst")
    nodes = graph.nodes
    for end, name in (("src", src), ("dst", dst)):
        if name not in nodes:
            raise GraphFileError(f"{end} names node {short_repr(name)}, which does not exist", node=name,
                                 field=f"edges[{i}].{end}")
    edge = Edge(src, dst, raw.get("src_port", "out"), raw.get("dst_port", "in"))
    if not isinstance(edge.src_port, str) or not isinstance(edge.dst_port, str):
        raise GraphFileError("ports must be text", field=f"edges[{i}]")
    for node_id, port, side in ((src, edge.src_port, "output"), (dst, edge.dst_port, "input")):
        spec = get_layer(nodes[node_id].type)
        if spec is not None and not (spec.has_output(port) if side == "output" else port in spec.input_names):
            raise GraphFileError(f"{spec.type} has no {side} port {short_repr(port)} (edges[{i}])", node=node_id,
                                 field=f"{'src' if side == 'output' else 'dst'}_port")
    if edge in seen:
        raise GraphFileError(f"edge {edge} appears twice", field=f"edges[{i}]")
    raise AssertionError(f"edges[{i}]: the fast path refused an edge the checks accept")  # pragma: no cover


def _decode_group(graph: Graph, raw: Any, i: int) -> Group:
    where = f"groups[{i}]"
    if not isinstance(raw, dict):
        raise GraphFileError("must be an object", field=where)
    _no_unknown(raw, {"id", "name", "nodes", "collapsed", "kind", "repeat"}, None, f"{where}.")
    gid = _get(raw, "id", str, None, f"{where}.id")
    name = _get(raw, "name", str, None, f"{where}.name")
    nodes = _get(raw, "nodes", list, None, f"{where}.nodes")
    missing = [n for n in nodes if not isinstance(n, str) or n not in graph.nodes]
    if missing:
        raise GraphFileError(f"group '{name}' names node '{missing[0]}', which does not exist", field=f"{where}.nodes")
    collapsed = raw.get("collapsed", True)
    if not isinstance(collapsed, bool):
        raise GraphFileError("must be true or false", field=f"{where}.collapsed")
    kind = raw.get("kind", "")
    if not isinstance(kind, str):
        raise GraphFileError("must be text", field=f"{where}.kind")
    return Group(gid, name, list(nodes), collapsed, kind, group_repeat(raw, name, where))


def _get(obj: dict[str, Any], key: str, kind: type, node: str | None, field: str) -> Any:
    if key not in obj:
        raise GraphFileError("is missing", node=node, field=field)
    value = obj[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise GraphFileError(f"must be {_KIND_NAMES[kind]}, got {short_repr(value)}", node=node, field=field)
    return value


_KIND_NAMES = {dict: "an object", list: "a list", str: "text", int: "an integer"}


def _no_unknown(obj: dict[str, Any], known: set[str], node: str | None, prefix: str) -> None:
    if obj.keys() <= known:
        return
    extra = sorted(set(obj) - known)
    if extra:
        raise GraphFileError(f"unknown field (expected one of {', '.join(sorted(known))})", node=node,
                             field=prefix + extra[0])
