"""A pretrained start's frozen blocks in the memory prediction: their weights count, but they hold no
gradients and no optimizer state, as in the run (``trainer.finetune.freeze``)."""

from __future__ import annotations

import pytest

from graph_editor.building import build_module
from tests.trainer.memory.test_memory_predict import template
from trainer.memory.doctor import predict_for_spec
from trainer.memory.prediction import MemoryPredictionError, largest_batch, predict_memory
from trainer.spec import spec_from_dict


def _param_bytes(graph, prefix: str) -> int:
    return sum(p.numel() * p.element_size() for n, p in build_module(graph, device="meta").named_parameters()
               if n.startswith(prefix))


def test_a_frozen_backbone_holds_no_gradients_or_optimizer_state():
    g = template("digits_cnn")
    plain, tuned = predict_memory(g, 8), predict_memory(g, 8, frozen=["conv1..relu3"])
    assert tuned.frozen == ["conv1..relu3"]
    assert tuned.parts["weights"] == plain.parts["weights"]          # frozen weights still live
    head = _param_bytes(g, "fc.")
    # AdamW keeps two moments per trained parameter (and a step count per tensor): the head's only
    assert 2 * head <= tuned.parts["optimizer"] < 2 * head + 1024
    assert plain.parts["optimizer"] > 50 * tuned.parts["optimizer"]
    assert tuned.phase_peaks["backward"]["gradients"] <= head
    assert tuned.peak_bytes < plain.peak_bytes / 2


def test_the_spec_s_frozen_blocks_reach_the_prediction():
    g = template("digits_cnn")
    spec = spec_from_dict({"model": {"frozen": ["conv1..bn2"]}, "train": {"batch_size": 16}})
    pred = predict_for_spec(g, spec, channels_last=False)
    assert pred.frozen == ["conv1..bn2"]
    assert pred.parts["optimizer"] < predict_for_spec(g, spec_from_dict({"train": {"batch_size": 16}}),
                                                      channels_last=False).parts["optimizer"]


@pytest.mark.slow      # two searches of the largest batch, ~14 predictions (~3 s of CPU)
def test_frozen_blocks_reach_the_batch_search():
    g = template("digits_cnn")
    budget = predict_memory(g, 16, frozen=["conv1..bn2"]).peak_bytes * 3
    n_frozen, _ = largest_batch(g, budget, frozen=["conv1..relu3"], upper=4096)
    n_plain, _ = largest_batch(g, budget, upper=4096)
    assert n_frozen > n_plain


def test_a_frozen_entry_that_names_nothing_is_named():
    with pytest.raises(MemoryPredictionError, match="model.frozen"):
        predict_memory(template("digits_cnn"), 4, frozen=["nope..fc"])
