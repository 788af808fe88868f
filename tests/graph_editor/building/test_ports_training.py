"""The real worker trains a graph with several-output, learned-tensor and attention nodes, as it does any graph."""

from __future__ import annotations

import pytest
from safetensors.torch import load_file

from graph_editor.building import build_module
from graph_editor.model import Graph, InputSpec
from tests.trainer.helpers import kinds, run_worker, write_spec


def digits_tokens() -> Graph:
    """8x8 digits: a conv's channels split in two (a gate), four tokens of 64 values plus a learned position
    embedding, self-attention over them, a class head."""
    g = Graph(InputSpec((1, 8, 8)), 10, {"name": "digit tokens"})
    g.chain(("Input", "input"), ("Conv2d", "conv", {"out_channels": 8, "kernel_size": 3, "padding": 1}),
            ("Split", "halves", {"sizes": [4, 4], "dim": 1}), ("Tanh", "value"))
    g.chain(("Sigmoid", "gate"), start="halves")
    g.remove_edge(next(e for e in g.edges if e.dst == "gate"))
    g.connect("halves", "gate", src_port="out1")
    g.add_node("Multiply", "gated")
    g.connect("value", "gated")
    g.connect("gate", "gated")
    g.chain(("Reshape", "tokens", {"shape": [4, 64]}), start="gated")
    g.add_node("Parameter", "pos", {"shape": [4, 64]})
    g.add_node("Add", "placed")
    g.connect("tokens", "placed")
    g.connect("pos", "placed")
    g.add_node("ScaledDotProductAttention", "attn")
    for port in ("q", "k", "v"):
        g.connect("placed", "attn", dst_port=port)
    g.chain(("Flatten", "flat"), ("Linear", "head", {"out_features": 10}), ("Output", "output"), start="attn")
    return g


@pytest.mark.process
def test_the_worker_trains_it_and_its_checkpoint_loads(tmp_path):
    spec = write_spec(tmp_path, digits_tokens(), train={"epochs": 2, "batch_size": 64}, optim={"lr": 0.01})
    code, events, stderr = run_worker(spec, f"sqlite:///{tmp_path / 'runs.db'}")
    assert code == 0, stderr
    assert kinds(events)[0] == "run_started" and kinds(events)[-1] == "finished", kinds(events)
    epochs = [e for e in events if e.event == "epoch_end"]
    assert len(epochs) == 2 and epochs[-1].val_accuracy > 0.3, epochs[-1]
    checkpoint = next(e for e in events if e.event == "checkpoint").path
    model = build_module(digits_tokens())
    saved = load_file(checkpoint)
    model.load_state_dict({k.removeprefix("model."): v for k, v in saved.items() if k.startswith("model.")})
    assert "model.pos.value" in saved  # the learned position embedding trained and was kept
    assert model.pos.value.abs().sum() > 0
