import os
import subprocess

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


@pytest.fixture(autouse=FAST)
def _no_processes_in_the_fast_set(monkeypatch, request):
    if not FAST:
        return

    def refuse(*args, **kwargs):
        raise AssertionError(f"{request.node.nodeid} starts a process: mark its module "
                             "`pytestmark = pytest.mark.process` (make test-fast leaves those out)")

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
