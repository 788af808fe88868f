import ast
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import settings

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# A studio started by a test (the desktop walks) does not compile the templates in the background.
os.environ.setdefault("TORCH_STUDIO_WARM_COMPILE", "0")

# The fuzz tests explore new examples on every local run; under CI they replay one fixed sequence, so a
# submission is judged on the same examples it was tested with (a new find shows up locally first).
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

# `make test-fast` deselects the tests marked `process` (they start a worker, the CLI, torchrun, a
# compile pool...), `export` and `slow`, and sets this variable: a test that starts a process anyway
# fails, naming the marker it lacks, so the fast set stays fast as tests are added.
FAST = os.environ.get("TORCH_STUDIO_TEST_FAST") == "1"
# The marks `make test-fast` deselects (its -m expression; tests/test_fast_set.py keeps the two the same).
FAST_DESELECTS = frozenset({"slow", "process", "export", "cuda"})


def module_marks(path: Path) -> frozenset[str]:
    """The marks of a test module's own ``pytestmark``, read from its source without importing it."""
    for node in ast.parse(path.read_bytes(), str(path)).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            return frozenset(n.attr for n in ast.walk(node.value)
                             if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Attribute)
                             and n.value.attr == "mark")
    return frozenset()


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """In the fast set, a module marked as a whole with a mark it deselects is not even imported: each
    xdist worker imported (and rewrote the asserts of) ~45 such modules, and their imports (onnx,
    torch.distributed, optuna...), only for every test in them to be deselected."""
    if FAST and collection_path.suffix == ".py" and collection_path.name.startswith("test_") \
            and module_marks(collection_path) & FAST_DESELECTS:
        return True
    return None


@pytest.fixture(autouse=FAST)
def _no_processes_in_the_fast_set(monkeypatch, request):
    if not FAST:
        return

    def refuse(*args, **kwargs):
        raise AssertionError(f"{request.node.nodeid} starts a process: mark its module "
                             "`pytestmark = pytest.mark.process` (make test-fast leaves those out)")

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
