"""timm's architecture families through the importer (issue 23): nobody chose this list.

``make test`` walks a fixed sample of cheap models across families (parameters exact, FLOPs equal to
FlopCounterMode's, outputs within 1e-5 of their largest value after all-zero weights are re-drawn);
``make test-thorough`` walks every family of ``timm.list_modules()``, its smallest variant up to 100M
parameters (``tools/import_walk.py --timm``, results in docs/import.md).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from tests.trainer.helpers import THOROUGH

pytest.importorskip("timm")

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("import_walk", ROOT / "tools" / "import_walk.py")
assert _spec and _spec.loader
walk = sys.modules.get("import_walk") or importlib.util.module_from_spec(_spec)
if "import_walk" not in sys.modules:
    sys.modules[_spec.name] = walk  # its dataclasses look their module up while being defined
    _spec.loader.exec_module(walk)

# Three of the cheapest families of the walk, none among test_import_zoo's (6-9 s each here at load ~10;
# fasternet_t0, inception_next_atto and mambaout_femto, 9-13 s, left to the walk for CI's budget). Program
# nodes are proven in test_program_node and test_import_user_code, at a cost CI can carry.
SAMPLE = ["starnet_s050", "dla46_c", "ese_vovnet19b_slim_dw"]


@pytest.mark.parametrize("name", SAMPLE)
def test_a_sample_of_timm_families_imports_exactly(name):
    outcome = walk.walk_one(walk.timm_case(name), onnx=False, strict=False)
    assert outcome.ok, outcome.cause


@pytest.mark.slow
@pytest.mark.skipif(not THOROUGH, reason="make test-thorough: every timm family, about a minute each")
@pytest.mark.parametrize("case", walk.timm_family_cases() if THOROUGH else [], ids=lambda c: c.family)
def test_every_timm_family_imports_exactly(case):
    outcome = walk.walk_one(case, onnx=True, strict=False)
    assert outcome.ok, outcome.cause
