"""The package boundaries of DESIGN.md, checked on the source (imports inside functions too)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QT = ("PySide6", "PyQt5", "PyQt6", "pyqtgraph", "qtpy", "shiboken6")


def imported_modules(path: Path) -> set[str]:
    """Absolute names of every module ``path`` imports; relative imports are resolved against
    the file's package, so ``from ..build import x`` in graph_editor/model counts as graph_editor.build."""
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
    return names


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
    assert offenders("graph_editor/model", ("graph_editor.build", "graph_editor.ui")) == []
    assert offenders("graph_editor/build", ("graph_editor.ui",)) == []
    assert offenders("trainer", ("exporters",)) == []
    assert offenders("trainer", ("graph_editor.ui",)) == []


def test_studio_reads_the_run_store_through_its_methods():
    """No SQL in the app shell: run-history queries are :class:`trainer.store.RunStore` methods."""
    assert offenders("studio", ("sqlalchemy",)) == []


def test_the_worker_protocol_and_its_client_stay_light():
    """The CLI and the studio load the protocol, the client and the liveness check without torch,
    Qt or a database driver."""
    for rel in ("trainer/events.py", "trainer/client.py", "trainer/liveness.py", "trainer/per_class.py"):
        heavy = {n for n in imported_modules(ROOT / rel) if n.split(".")[0] in ("torch", "sqlalchemy", *QT)}
        assert heavy == set(), rel


def test_the_check_resolves_relative_imports():
    # graph_editor/build/fx.py imports ``from ..model import ...``
    assert "graph_editor.model" in imported_modules(ROOT / "graph_editor" / "build" / "fx.py")


def test_the_check_sees_lazy_imports(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("def f():\n    import PySide6.QtCore\n    __import__('torch')\n")
    assert {"PySide6.QtCore", "torch"} <= imported_modules(f)
