"""The training matrix under FSDP2 (one process and DDP: test_training_matrix.py, in a file of its own so
that make test's two xdist workers share the matrix; how a case is run and checked: matrix_run.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .matrix_cases import Case
from .matrix_run import CASES, check_case, params

pytestmark = pytest.mark.process


@pytest.fixture(scope="module")
def inductor_cache(tmp_path_factory) -> str:
    """One inductor cache for the compiled cases (as a user's persistent one): kernels they share compile once."""
    return str(tmp_path_factory.mktemp("inductor"))


@pytest.mark.parametrize("case", params([c for c in CASES if c.strategy == "fsdp2"]))
def test_a_template_trains_in_the_matrix_under_fsdp2(case: Case, tmp_path: Path, inductor_cache: str):
    check_case(case, tmp_path, inductor_cache)
