import ast
import faulthandler
import gc
import os
import subprocess
import tempfile
from pathlib import Path
from typing import IO

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


def pytest_collection_finish(session: pytest.Session) -> None:
    """What the imports made (torch, Qt, the project: ~400,000 objects) is left out of the collector's
    walks from here on (``gc.freeze``): a full collection over it takes 0.25 s, and the collection after
    each Qt test (below) should walk only what the tests made since. torch is imported here if no test
    module did (the studio's tests import it in their tests)."""
    import torch  # noqa: F401
    gc.collect()
    gc.freeze()


QT_FIXTURES = frozenset({"qapp", "qtbot"})


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    """A Qt test's garbage is collected on the main thread as soon as its fixtures are torn down. Left to
    the automatic collector, its garbage widgets were destroyed wherever a later allocation crossed the
    threshold: on a reader thread of a later test's worker client too, off the GUI thread, which can crash
    the process (CI lost a test process in a test that uses no Qt); here a crash names the test that made
    the garbage. At the end of a test module (its fixtures gone) the garbage is collected and what is
    left lives on (modules imported since, the session's fixtures): it is frozen too, or each Qt test's
    collection would walk it again (0.15 s a test once training's modules were imported)."""
    try:
        return (yield)
    finally:
        if nextitem is None or nextitem.module is not getattr(item, "module", None):
            gc.collect()
            gc.freeze()
        elif item.get_closest_marker("qt") or QT_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            gc.collect()


# A native crash of a pytest-xdist worker: the controller reports "worker 'gw1' crashed while running
# TEST", and the stacks faulthandler wrote went to the worker's stderr, interleaved with the run's output,
# every thread's, ending with the main thread's pytest frames (a CI log kept only that end). Each worker
# writes them to its own file instead, and the controller puts the crashing thread's stack in the
# test's failure report.
_CRASH_KEY = pytest.StashKey[IO[str]]()


def _crash_file(worker: str, controller_pid: int) -> Path:
    return Path(tempfile.gettempdir()) / f"torch-studio-tests-{controller_pid}-{worker}.crash"


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        config.stash[_CRASH_KEY] = stream = open(_crash_file(worker, os.getppid()), "w")  # noqa: SIM115
        faulthandler.enable(file=stream, all_threads=True)


def pytest_unconfigure(config: pytest.Config) -> None:
    stream = config.stash.get(_CRASH_KEY, None)
    if stream is not None:
        faulthandler.disable()
        stream.close()
        Path(stream.name).unlink(missing_ok=True)


@pytest.hookimpl(optionalhook=True)
def pytest_handlecrashitem(crashitem: str, report: pytest.TestReport, sched: object) -> None:
    """In the controller: the worker's fatal error and the stack of the thread that crashed."""
    path = _crash_file(report.node.gateway.id, os.getpid())   # xdist puts the crashed worker on the report
    if not path.exists():
        return
    dump = path.read_text(errors="replace")
    path.unlink(missing_ok=True)
    blocks = dump.split("\n\n")
    current = [b for b in blocks if b.startswith("Current thread")]
    others = [b.splitlines()[0] + " " + (b.splitlines()[1].strip() if len(b.splitlines()) > 1 else "")
              for b in blocks if b.startswith("Thread 0x")]
    report.longrepr = "\n".join([str(report.longrepr), blocks[0].strip(), *current,
                                  "the other threads, each with its newest frame:", *others])
