"""`make test-fast`: the marks it deselects, and its collection, which leaves out whole modules by their
``pytestmark`` without importing them (tests/conftest.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FAST_DESELECTS, module_marks

ROOT = Path(__file__).resolve().parents[1]


def _fast_recipe() -> str:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    return makefile.split("\ntest-fast:", 1)[1].split("\n\n", 1)[0]


def test_the_conftest_leaves_out_the_marks_the_make_target_deselects():
    expression = re.search(r'-m "([^"]+)"', _fast_recipe())
    assert expression is not None
    assert set(re.findall(r"not (\w+)", expression.group(1))) == FAST_DESELECTS
    assert expression.group(1) == " and ".join(f"not {m}" for m in re.findall(r"not (\w+)", expression.group(1)))
    assert "TORCH_STUDIO_TEST_FAST=1" in _fast_recipe()


def test_a_modules_marks_are_read_from_its_source(tmp_path):
    cases = {
        "pytestmark = pytest.mark.process\n": {"process"},
        "import pytest\npytestmark = [pytest.mark.qt, pytest.mark.slow,\n              pytest.mark.process]\n":
            {"qt", "slow", "process"},
        "x = 1\n\ndef test():\n    pytestmark = pytest.mark.slow\n": set(),      # not the module's own
        "@pytest.mark.slow\ndef test():\n    pass\n": set(),                      # a test's mark, not the module's
    }
    for i, (source, marks) in enumerate(cases.items()):
        path = tmp_path / f"test_{i}.py"
        path.write_text(source, encoding="utf-8")
        assert module_marks(path) == marks, source


@pytest.mark.slow
@pytest.mark.process
def test_the_modules_the_fast_set_leaves_out_hold_no_test_it_selects():
    """The modules the filter leaves out, collected by pytest itself (imported, every test's marks): the
    fast set's -m expression selects none of their tests."""
    left_out = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "tests").rglob("test_*.py"))
                if module_marks(p) & FAST_DESELECTS]
    assert len(left_out) > 30
    expression = " and ".join(f"not {m}" for m in sorted(FAST_DESELECTS))
    env = {**os.environ, "TORCH_STUDIO_TEST_FAST": "0", "QT_QPA_PLATFORM": "offscreen"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:xdist", "-p",
                           "no:cacheprovider", "-m", expression, *left_out], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    summary = done.stdout.strip().splitlines()[-1]
    assert done.returncode == 5 and re.match(r"no tests collected \((\d+) deselected\)", summary), done.stdout[-3000:]
    assert int(re.findall(r"\d+", summary)[0]) > 200
