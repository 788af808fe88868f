"""The package boundaries, checked on the source (imports inside functions too).

Who may import whom: studio -> graph_editor, trainer, exporters; trainer -> graph_editor (model and
the torch side, never ui); exporters -> graph_editor, trainer; nothing imports studio. Only studio and
graph_editor/ui import Qt; graph_editor/model imports neither Qt nor torch."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

from tests.import_graph import PACKAGES, Scope, cycles, import_graph

ROOT = Path(__file__).resolve().parents[1]
QT = ("PySide6", "PyQt5", "PyQt6", "pyqtgraph", "qtpy", "shiboken6")
TORCH_SIDE = ("graph_editor.building", "graph_editor.analysis", "graph_editor.autograd", "graph_editor.importer")


@functools.cache     # each file once per process: the tests below read the same packages again and again
def imported_modules(path: Path) -> frozenset[str]:
    """Absolute names of every module ``path`` imports; relative imports are resolved against
    the file's package, so ``from ..building import x`` in graph_editor/model counts as graph_editor.building."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    package = _package_of(path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
        elif isinstance(node, ast.ImportFrom) and node.level > 0 and package:
            base = package[:len(package) - (node.level - 1)] if node.level > 1 else package
            names.add(".".join([*base, *([node.module] if node.module else [])]))
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                "import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant):
            names.add(str(node.args[0].value))
    return frozenset(names)


def _package_of(path: Path) -> list[str]:
    try:
        rel = path.resolve().relative_to(ROOT)
    except ValueError:
        return []
    return list(rel.parent.parts)


def sources(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def offenders(package: str, forbidden: tuple[str, ...], skip: tuple[str, ...] = ()) -> list[str]:
    out = []
    for path in sources(package):
        rel = path.relative_to(ROOT).as_posix()
        if any(rel.startswith(s) for s in skip):
            continue
        for name in imported_modules(path):
            if name.split(".")[0] in forbidden or any(name == f or name.startswith(f + ".") for f in forbidden):
                out.append(f"{rel} imports {name}")
    return out


@pytest.mark.slow
def test_no_qt_outside_studio_and_editor_ui():
    for package in ("graph_editor", "trainer", "exporters"):
        assert offenders(package, QT, skip=("graph_editor/ui/",)) == []


def test_model_imports_neither_torch_nor_qt():
    assert offenders("graph_editor/model", ("torch", "numpy", *QT)) == []


def test_nothing_imports_studio():
    assert offenders("graph_editor", ("studio",)) == []
    assert offenders("trainer", ("studio",)) == []
    assert offenders("exporters", ("studio",)) == []


def test_layering():
    assert offenders("graph_editor", ("trainer", "exporters")) == []
    assert offenders("graph_editor/model", (*TORCH_SIDE, "graph_editor.ui")) == []
    for package in TORCH_SIDE:
        assert offenders(package.replace(".", "/"), ("graph_editor.ui",)) == []
    assert offenders("trainer", ("exporters",)) == []
    assert offenders("trainer", ("graph_editor.ui",)) == []


@pytest.mark.slow
def test_studio_reads_the_run_store_through_its_methods():
    """No SQL in the app shell: run-history queries are :class:`trainer.store.runs.RunStore` methods."""
    assert offenders("studio", ("sqlalchemy",)) == []


def test_the_worker_protocol_and_its_client_stay_light():
    """The CLI and the studio load the protocol, the client and the liveness check without torch,
    Qt or a database driver."""
    for rel in ("trainer/protocol/events.py", "trainer/protocol/client.py", "trainer/store/liveness.py", "trainer/metrics/per_class.py"):
        heavy = {n for n in imported_modules(ROOT / rel) if n.split(".")[0] in ("torch", "sqlalchemy", *QT)}
        assert heavy == set(), rel


def test_the_check_resolves_relative_imports():
    # graph_editor/building/fx.py imports ``from ..model import ...``
    assert "graph_editor.model" in imported_modules(ROOT / "graph_editor" / "building" / "fx.py")


def test_the_check_sees_lazy_imports(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("def f():\n    import PySide6.QtCore\n    __import__('torch')\n")
    assert {"PySide6.QtCore", "torch"} <= imported_modules(f)


# ---------------------------------------------------------------------- import cycles
# Lazy (in-function) or type-only imports that close a loop, each allowed for its reason. Keyed by
# edge, not by cycle, so a new layer file or dataset reader does not touch this list; a new loop
# anywhere else fails the test.
ALLOWED_BACK_EDGES: dict[tuple[str, str], str] = {
    ("graph_editor.model.catalog", "graph_editor.model.layers"):
        "plugin registry: the layer families register themselves with the catalog; the catalog "
        "imports the package on first lookup so that every family is loaded",
    ("exporters.registry", "exporters.formats"):
        "plugin registry: each export format registers itself; the registry loads the built-in "
        "formats on first lookup",
    ("trainer.data.formats", "trainer.data.readers"):
        "plugin registry: each @dataset_format reader registers itself; FORMATS loads the built-in "
        "readers on first lookup",
    ("graph_editor.model.graph", "graph_editor.model.serialize"):
        "Graph.copy is a save and load in memory, so a copy is exactly what the file format keeps; "
        "the serializer builds Graphs",
    **{(f"graph_editor.ui.{helper}", "graph_editor.ui.canvas"):
       "type-only (TYPE_CHECKING): the canvas builds its overlays, gestures and menus and hands "
       "them itself; they annotate what they are handed"
       for helper in ("breadcrumbs", "gestures", "menus", "minimap")},
    ("trainer.checkpoints.saving", "trainer.job"):
        "type-only (TYPE_CHECKING): the checkpoints callback annotates the job whose state it saves; "
        "the job builds it",
    ("graph_editor.ui.items", "graph_editor.ui.wires"):
        "type-only (TYPE_CHECKING): a port lists the wires on it, a wire joins two ports",
}


@functools.cache
def project_graph(scope: Scope) -> dict[str, frozenset[str]]:
    return {m: frozenset(e) for m, e in import_graph(ROOT, PACKAGES, scope=scope).items()}


@pytest.mark.slow
def test_the_project_has_no_import_cycle_at_module_level():
    """What runs on import (TYPE_CHECKING, ``__main__`` and in-function imports aside) has no loop."""
    graph = project_graph("module")
    assert len(graph) > 150 and "trainer.worker" in graph and "graph_editor.ui.canvas" in graph
    assert cycles(graph) == []


@pytest.mark.slow
def test_every_import_cycle_is_an_allowed_lazy_registry_edge():
    module_level = project_graph("module")
    graph = {m: set(e) for m, e in project_graph("all").items()}
    for (src, dst), reason in ALLOWED_BACK_EDGES.items():
        assert dst in graph[src], f"{src} -> {dst} is gone: drop it from ALLOWED_BACK_EDGES ({reason})"
        assert dst not in module_level[src], f"{src} imports {dst} at module level: make it lazy"
    for src, dst in ALLOWED_BACK_EDGES:
        graph[src].discard(dst)
    assert cycles(graph) == []


def test_the_cycle_walk_tells_module_level_from_lazy_type_only_and_main(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\ntry:\n    from .c import x\nexcept ImportError:\n    pass\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import A\n"
                              "def f():\n    from pkg import a\n")
    (pkg / "c.py").write_text("class C:\n    from .b import f\nif __name__ == '__main__':\n    from .a import A\n")
    module_level = import_graph(tmp_path, "pkg", scope="module")
    assert module_level == {"pkg": set(), "pkg.a": {"pkg.b", "pkg.c"}, "pkg.b": set(), "pkg.c": {"pkg.b"}}
    assert cycles(module_level) == []
    everything = import_graph(tmp_path, "pkg", scope="all")
    assert everything["pkg.b"] == {"pkg.a"} and everything["pkg.c"] == {"pkg.a", "pkg.b"}
    assert cycles(everything) == [["pkg.a", "pkg.b", "pkg.c"]]
