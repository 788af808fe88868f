"""Helpers for the trainer tests: small graphs, spec files, the real worker process."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from graph_editor.model import Graph, InputSpec, save_graph
from trainer.protocol.client import WorkerClient
from trainer.protocol.events import Event
from trainer.spec import SCHEMA_VERSION

ROOT = Path(__file__).resolve().parents[2]
DIGITS_CNN = ROOT / "assets" / "templates" / "digits_cnn.graph.json"

# `make test` makes each claim with the fewest repetitions that make it (6 random kills, one memory case
# per template family and precision, one ONNX template per family); TORCH_STUDIO_TEST_THOROUGH=1 (make
# test-thorough) runs the full counts (20 kills, every template at every precision and batch, every
# template in ONNX) before a release or after a change to what they prove.
THOROUGH = os.environ.get("TORCH_STUDIO_TEST_THOROUGH") == "1"


def tiny_cnn(channels: int = 1, size: int = 8, classes: int = 10) -> Graph:
    """A few-thousand-parameter convnet: fast enough for many worker runs in the test budget."""
    g = Graph(InputSpec((channels, size, size)), classes, {"name": "tiny"})
    g.chain(("Input", "input"),
            ("Conv2d", "conv", {"out_channels": 8, "kernel_size": [3, 3], "padding": [1, 1]}),
            ("ReLU", "relu"), ("AdaptiveAvgPool2d", "pool", {"output_size": [2, 2]}), ("Flatten", "flat"),
            ("Linear", "fc", {"out_features": classes}), ("Output", "output"))
    return g


def tiny_mlp(features: int, classes: int) -> Graph:
    g = Graph(InputSpec((features,)), classes, {"name": "tiny mlp"})
    g.chain(("Input", "input"), ("Linear", "fc1", {"out_features": 16}), ("ReLU", "relu"),
            ("Linear", "fc2", {"out_features": classes}), ("Output", "output"))
    return g


def write_spec(folder: Path, graph: Graph | Path | None = None, **sections: Any) -> Path:
    """A spec file in ``folder``: the tiny CNN on the digits for 1 epoch unless sections say otherwise."""
    if graph is None:
        graph = tiny_cnn()
    if isinstance(graph, Graph):
        gpath = folder / "net.graph.json"
        save_graph(graph, gpath)
        graph = gpath
    spec: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "name": "test", "model": {"graph": str(graph)},
                            "train": {"epochs": 1, "batch_size": 64, "metrics_interval_s": 0.1},
                            "device": "cpu"}
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(spec.get(key), dict):
            spec[key] = {**spec[key], **value}
        else:
            spec[key] = value
    path = folder / "spec.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    return path


def run_worker(spec: Path, db: str, timeout: float = 120) -> tuple[int, list[Event], str]:
    """Run the real worker to its end; (exit status, typed events, stderr)."""
    with WorkerClient.run(spec, db=db) as w:
        events = list(w.events(timeout=timeout))
        code = w.wait(timeout)
    return code, events, w.stderr


def kinds(events: list[Event]) -> list[str]:
    return [e.event for e in events]


def profiled_peak(prof: Any) -> int:
    """The peak of live tensor bytes a ``torch.profiler.profile(profile_memory=True)`` saw: its
    ``[memory]`` events (allocations positive, frees negative) added up in time order."""
    events = sorted((e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"),
                    key=lambda e: e.start_ns())
    live = peak = 0
    for e in events:
        live += e.nbytes()
        peak = max(peak, live)
    return peak
