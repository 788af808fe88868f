"""The project's import graph, read from the source with ``ast`` (nothing is imported), and its
cycles. ``scope`` picks which imports count:

- ``"module"``: what runs when the module is imported -- the top level, ``if``/``try`` blocks and
  class bodies, but not ``if TYPE_CHECKING:`` blocks, not ``if __name__ == "__main__":`` blocks (they
  run only in a script, under another module's name) and not function bodies;
- ``"all"``: every import anywhere in the file (TYPE_CHECKING blocks and lazy in-function imports too).

``from .x import y`` counts as an edge to ``x.y`` when that is a module, otherwise to ``x``."""

from __future__ import annotations

import ast
from collections.abc import Collection, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Literal

Scope = Literal["module", "all"]
ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("exporters", "graph_editor", "trainer", "studio")


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _not_on_import(test: ast.expr) -> bool:
    """``if TYPE_CHECKING:`` and ``if __name__ == "__main__":``: bodies that importing never runs."""
    if isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__":
        return any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators)
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.Module, scope: Scope) -> Iterator[ast.Import | ast.ImportFrom]:
    if scope == "all":
        yield from (n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)))
        return

    def walk(body: Iterable[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                yield node
            elif isinstance(node, ast.If):
                if not _not_on_import(node.test):
                    yield from walk(node.body)
                yield from walk(node.orelse)
            elif isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))):
                for block in (node.body, *(h.body for h in node.handlers), node.orelse, node.finalbody):
                    yield from walk(block)
            elif isinstance(node, (ast.With, ast.For, ast.While, ast.ClassDef)):
                yield from walk(node.body)

    yield from walk(tree.body)


def import_graph(root: Path = ROOT, packages: str | Iterable[str] = PACKAGES,
                 scope: Scope = "all") -> dict[str, set[str]]:
    """Module -> the project modules it imports (within ``packages`` under ``root``)."""
    packages = (packages,) if isinstance(packages, str) else tuple(packages)
    files = {module_name(p, root): p for package in packages for p in sorted((root / package).rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for mod, path in files.items():
        here = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        edges: set[str] = set()
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)), scope):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                base = ".".join([*here[:len(here) - node.level + 1], *([node.module] if node.module else [])]) \
                    if node.level else node.module or ""
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            for name in names:
                while name and name not in files:
                    name = name.rpartition(".")[0]
                if name and name != mod:
                    edges.add(name)
        graph[mod] = edges
    return graph


def cycles(graph: Mapping[str, Collection[str]]) -> list[list[str]]:
    """The import cycles: each strongly connected group of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(groups)


if __name__ == "__main__":
    for scope in ("module", "all"):
        found = cycles(import_graph(scope=scope))  # type: ignore[arg-type]
        print(f"{scope}: {len(found)} cycles")
        for group in found:
            print("  ", " ".join(group))
