"""timm's architecture families through the importer (issue 23): nobody chose this list.

``make test`` walks a fixed sample of 18 families across the list (``make test-fast`` two of them) (parameters exact, FLOPs equal to
FlopCounterMode's, outputs within 1e-5 of their largest value after all-zero weights are re-drawn),
the cheapest of each kind; ``make test-thorough`` walks every family of ``timm.list_modules()`` with the
model ``tools/import_walk.py --timm`` chose for it (its smallest by parameter count, listed in
``tools/timm_families.json``), the ONNX proof included. Results and times: docs/import.md.
"""

from __future__ import annotations

import pytest

from tests.tool_modules import load_tool
from tests.trainer.helpers import THOROUGH

timm = pytest.importorskip("timm")


walk = load_tool("import_walk")
families = load_tool("timm_families")

# 18 families from across the list, each its walk's model, the cheapest to walk (about 1-2 s of CPU each on one
# thread): convnets of many kinds, mobile blocks, MetaFormer-style blocks, an MLP that outputs 0 at
# initialisation (gMLP: its zero weights re-drawn), PVT v2's attention (strictly), HGNetV2 (one Program node)
SAMPLE = {
    "cspnet": "cs3darknet_focus_s", "cspnext": "cspnext_tiny", "dla": "dla46x_c", "efficientnet": "mnasnet_small",
    "fasternet": "fasternet_t0", "ghostnet": "ghostnet_050", "hardcorenas": "hardcorenas_b", "hgnet": "hgnetv2_b0",
    "inception_next": "inception_next_atto", "lcnetv2": "lcnetv2_small", "mambaout": "mambaout_femto",
    "mlp_mixer": "gmlp_ti16_224", "mobilenetv3": "mobilenetv3_small_050", "pvt_v2": "pvt_v2_b0",
    "repghost": "repghostnet_050", "repvit": "repvit_m1", "starnet": "starnet_s1", "vovnet": "ese_vovnet19b_slim_dw",
}


@pytest.fixture
def one_thread():
    """One thread: ``make test`` runs two xdist workers on two cores, and PyTorch's spinning second thread
    doubled the sample's CPU time (142 s of CPU for 20 families on two threads; ~1.2 s a model on one)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_the_walk_chose_a_model_for_every_family_of_this_timm():
    chosen = families.chosen_cases()
    assert {c.family for c in chosen} == set(timm.list_modules())  # a new family of timm: walk it and list it
    for case in chosen:
        assert case.name in timm.list_models(module=case.family) and not case.name.startswith("test_")
    assert {c.family: c.name for c in chosen if c.family in SAMPLE} == SAMPLE


# make test-fast walks two of the sample (a mobile convnet and PVT v2's attention, ~1 s of CPU each); the
# other 16 are a long proof (~20 s of CPU, a sixth of the fast set) that make test runs.
FAST_SAMPLE = ("mobilenetv3", "pvt_v2")


@pytest.mark.parametrize("family", [pytest.param(f, marks=[] if f in FAST_SAMPLE else [pytest.mark.slow])
                                    for f in SAMPLE])
def test_a_sample_of_timm_families_imports_exactly(family, one_thread):
    outcome = walk.walk_one(families.family_case(family, SAMPLE[family]), onnx=False, strict=False)
    assert outcome.ok, outcome.cause


@pytest.mark.slow
@pytest.mark.export
@pytest.mark.skipif(not THOROUGH, reason="make test-thorough: every timm family, up to minutes each")
@pytest.mark.parametrize("case", families.chosen_cases() if THOROUGH else [], ids=lambda c: c.family)
def test_every_timm_family_imports_exactly(case):
    outcome = walk.walk_one(case, onnx=True, strict=False)
    assert outcome.ok, outcome.cause
