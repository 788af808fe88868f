"""Fixtures for the trainer tests (helpers live in helpers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def db(tmp_path: Path) -> str:
    """A run store in the test's own folder."""
    return f"sqlite:///{tmp_path / 'runs.sqlite'}"


@pytest.fixture(scope="session")
def inductor_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One TorchInductor cache folder (TORCHINDUCTOR_CACHE_DIR) for the session's compiled worker runs, as
    a user's runs share their persistent cache: a run finds what an earlier one compiled alike there (the
    compile-check test's run: 36 s of CPU with a folder of its own, 30-31 s after the compile test's
    run, measured twice)."""
    return tmp_path_factory.mktemp("inductor")
