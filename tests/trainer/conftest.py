"""Fixtures for the trainer tests (helpers live in helpers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def db(tmp_path: Path) -> str:
    """A run store in the test's own folder."""
    return f"sqlite:///{tmp_path / 'runs.sqlite'}"
