"""Habits of the tests themselves, checked on their source."""

from __future__ import annotations

import ast
import functools
import itertools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_every_polling_loop_in_the_tests_has_a_deadline():
    """A ``while`` that sleeps or waits until something happens also stops at a deadline (or a count): a
    condition that never comes true fails the test instead of hanging the suite."""
    waits = re.compile(r"sleep\(|\.wait\(|processEvents")
    bounded = re.compile(r"deadline|monotonic|timeout|perf_counter|range|readline")
    loose = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            text = line.strip()
            if text.startswith("while ") and not bounded.search(text) and waits.search("".join(lines[i + 1:i + 4])):
                loose.append(f"{path.relative_to(ROOT)}:{i + 1}")
    assert loose == [], f"polling loops without a deadline: {loose}"


@functools.cache
def _tests() -> list[tuple[Path, ast.Module]]:
    return [(p, ast.parse(p.read_text(encoding="utf-8"))) for p in sorted((ROOT / "tests").rglob("*.py"))]


# torch's own private modules (torch._dynamo's logs, torch._assert) are what a test of the compile check
# reads: torch is not ours to give a public reading.
FOREIGN = ("torch",)
PROJECT = ("studio", "trainer", "graph_editor", "exporters")


def _root(node: ast.expr) -> str:
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else ""


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_reads(tree: ast.Module) -> list[tuple[int, str]]:
    """``x._name`` (not the test's own ``self._name``), ``getattr(x, "_name")`` and the like, and
    ``from <project> import _name``: where a test reaches past what the product shows."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            own = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
            if not own and _root(node.value) not in FOREIGN:
                found.append((node.lineno, f"{_root(node.value)}...{node.attr}"))
        elif isinstance(node, ast.Call) and (getattr(node.func, "attr", None) or getattr(node.func, "id", None)) in (
                "getattr", "setattr", "hasattr", "delattr") and len(node.args) >= 2:
            name = node.args[1]
            if isinstance(name, ast.Constant) and isinstance(name.value, str) and _private(name.value) \
                    and _root(node.args[0]) not in FOREIGN:
                found.append((node.lineno, name.value))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in PROJECT:
            found += [(node.lineno, a.name) for a in node.names if _private(a.name)]
    return found


@pytest.mark.slow
def test_no_test_reads_a_private_attribute_of_the_product():
    """A test observes what a user gets, or a public reading that a user-facing behaviour justifies: a
    private attribute is free to change, and a test that reads it pins the code instead of the behaviour."""
    found = [f"{p.relative_to(ROOT)}:{line} {what}" for p, tree in _tests() for line, what in private_reads(tree)]
    assert found == [], f"tests reading private attributes: {found}"


def _fixed_wait(stmt: ast.stmt) -> bool:
    """``time.sleep(N)``, ``qtbot.wait(N)`` or ``QTest.qWait(N)`` with a constant N."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    func, args = stmt.value.func, stmt.value.args
    name = getattr(func, "attr", getattr(func, "id", ""))
    waits = name in ("sleep", "qWait") or (name == "wait" and _root(func) == "qtbot")
    return waits and len(args) == 1 and isinstance(args[0], ast.Constant)


def checks_after_fixed_waits(tree: ast.Module) -> list[int]:
    """Lines of a fixed wait followed at once by an ``assert`` (a polling loop's own sleep aside)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.While, ast.For, ast.AsyncFor)):
            continue
        for field in ("body", "orelse", "finalbody", "handlers"):
            block = getattr(node, field, None)
            if not isinstance(block, list):
                continue
            if field == "handlers":
                block = [s for h in block for s in h.body]
            found += [a.lineno for a, b in itertools.pairwise(block) if _fixed_wait(a) and isinstance(b, ast.Assert)]
    return found


@pytest.mark.slow
def test_no_check_follows_a_fixed_sleep():
    """"Nothing happened within 0.6 s" proves nothing on a loaded machine, and "it has happened by now"
    fails on one: a check waits on the event that makes it true (``qtbot.waitUntil``/``waitSignal``, a
    deadline loop, a reply), or on a later event that the awaited one would have come before."""
    found = [f"{p.relative_to(ROOT)}:{line}" for p, tree in _tests() for line in checks_after_fixed_waits(tree)]
    assert found == [], f"a check right after a fixed sleep: {found}"


def test_the_habit_checks_find_what_they_look_for():
    tree = ast.parse("import time\nfrom studio.app import _hidden\n"
                     "def test_x(qtbot, d, self=None):\n"
                     "    d._timer.stop(); self._mine = 1; getattr(d, '_memory'); torch._dynamo.reset()\n"
                     "    time.sleep(0.6)\n    assert d.poll() == []\n"
                     "    qtbot.wait(100)\n    assert not d.shown\n"
                     "    while d.busy:\n        time.sleep(0.1)\n        assert d\n")
    assert sorted(what for _, what in private_reads(tree)) == ["_hidden", "_memory", "d..._timer"]
    assert sorted(checks_after_fixed_waits(tree)) == [5, 7]


# Package folders whose modules are tested through one parametrised suite instead of files of their own:
# each layer family (model/layers/<family>.py + building/ops/<family>.py) is built, inferred, counted,
# written, imported and exported per catalog type by tests/graph_editor/building/test_ops_registry.py and
# the export round trips, so a new family adds test cases, not test files.
MIRRORED_ELSEWHERE = {"graph_editor/model/layers", "graph_editor/building/ops"}


def test_the_tests_mirror_every_package_folder_of_three_or_more_modules():
    missing = []
    for package in PROJECT:
        for folder in sorted([ROOT / package, *(p for p in (ROOT / package).rglob("*") if p.is_dir())]):
            modules = [p for p in folder.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
            rel = folder.relative_to(ROOT).as_posix()
            if len(modules) >= 3 and rel not in MIRRORED_ELSEWHERE and not (ROOT / "tests" / rel).is_dir():
                missing.append(rel)
    assert missing == [], f"package folders without a mirrored tests/ folder: {missing}"
