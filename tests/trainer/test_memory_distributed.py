"""One rank's predicted memory under DDP and FSDP2: the documented formulas on real predictions at
the per-rank batch, and the FSDP2 units the trainer itself would make."""

from __future__ import annotations

import pytest

from graph_editor.model import Graph, InputSpec
from graph_editor.model.graph import Group
from trainer.memory_distributed import per_rank, unit_bytes
from trainer.memory_predict import predict_memory
from trainer.spec import spec_from_dict

F32 = 4


def blocks() -> Graph:
    """Two groups of different size and a head outside any group."""
    g = Graph(InputSpec((32,)), 10, {"name": "blocks"})
    g.chain(("Input", "input"), ("Linear", "a1", {"out_features": 64}), ("ReLU", "ar"),
            ("Linear", "b1", {"out_features": 128}), ("ReLU", "br"), ("Linear", "b2", {"out_features": 64}),
            ("Linear", "head", {"out_features": 10}), ("Output", "output"))
    g.groups["small"] = Group("small", "small", ["a1", "ar"])
    g.groups["big"] = Group("big", "big", ["b1", "br", "b2"])
    return g


def spec(**distributed):
    return spec_from_dict({"train": {"batch_size": 64}, "optim": {"name": "adamw"}, "device": "cuda",
                           "distributed": {"strategy": "fsdp2", "nproc_per_node": 4, **distributed}})


def test_units_are_the_trainers_and_cover_every_parameter_once():
    g = blocks()
    small, big, head = (32 * 64 + 64) * F32, (64 * 128 + 128 + 128 * 64 + 64) * F32, (64 * 10 + 10) * F32
    assert sorted(unit_bytes(g, spec())) == sorted([small, big, head])        # the root keeps the head
    assert unit_bytes(g, spec(fsdp_units=["small"])) == [small, big + head]   # the rest is the root's


def test_ddp_and_fsdp2_follow_the_documented_formulas():
    g, s = blocks(), spec()
    at_16 = predict_memory(g, 16, "adamw", device="cpu")      # 64 over 4 ranks (cpu: bytes unrounded)
    p = at_16.parts
    weights = sum(unit_bytes(g, s))
    assert p["weights"] == weights
    got = per_rank(g, s, 4, device="cpu")
    state = p["weights"] + p["gradients"] + p["optimizer"]
    rest = at_16.peak_bytes - state
    assert got["ddp"].batch == got["fsdp2"].batch == 16
    assert got["ddp"].peak_bytes == at_16.peak_bytes + weights              # + the all-reduce buckets
    big = (64 * 128 + 128 + 128 * 64 + 64) * F32
    assert got["fsdp2"].peak_bytes == -(-state // 4) + 2 * big + rest       # sharded + largest unit gathered
    kept = per_rank(g, spec(reshard_after_forward=False), 4, device="cpu")["fsdp2"]
    assert kept.peak_bytes == -(-state // 4) + weights + big + rest
    assert sum(got["fsdp2"].parts.values()) == got["fsdp2"].peak_bytes


def test_the_batch_must_divide_among_the_ranks():
    with pytest.raises(ValueError, match="global batch 64 must divide evenly among 3"):
        per_rank(blocks(), spec(), 3)
