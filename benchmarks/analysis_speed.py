"""How fast the editor knows every shape, parameter and FLOP of a graph, against plain PyTorch.

Builds residual conv nets of about 100 and 300 nodes with the graph API and times, as the
median of several runs:

- ``validate()``: the pure-Python shape inference the canvas runs on every edit;
- ``analyze()`` cold (its per-layer parameter cache emptied first: a graph just opened) and
  warm (the cache filled: a live edit, where at most one layer changed);
- the plain-PyTorch way to get the same figures: build the module on the ``meta`` device and run
  a forward pass under ``torch.utils.flop_counter.FlopCounterMode``.

It prints the figures and the ratios; the issue asks for a 100-node analysis well under 50 ms.
No assertions: the machine may be shared and noisy.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from graph_editor.analysis import analyze
from graph_editor.analysis.per_node import _param_count  # noqa: E402
from graph_editor.building import build_module, example_input  # noqa: E402
from graph_editor.model import Graph, InputSpec, validate  # noqa: E402

BATCH = 32


def residual_net(target_nodes: int) -> Graph:
    """Stem, then residual blocks (conv-BN-ReLU-conv-BN-add-ReLU, 7 nodes) until ``target_nodes``;
    channels double and the image halves every 4 blocks."""
    g = Graph(InputSpec((3, 64, 64)), 100)
    x = g.chain(("Input", "input"), ("Conv2d", "stem", {"out_channels": 32, "kernel_size": 3, "padding": 1}),
                ("BatchNorm2d", "stem_bn"), ("ReLU", "stem_relu"))
    channels, block = 32, 0
    while len(g) + 7 + 4 <= target_nodes:
        down = block % 4 == 3 and channels < 512
        out = channels * 2 if down else channels
        conv = {"out_channels": out, "kernel_size": 3, "padding": 1, "bias": False}
        main = g.chain(("Conv2d", f"b{block}_conv1", {**conv, "stride": 2 if down else 1}),
                       ("BatchNorm2d", f"b{block}_bn1"), ("ReLU", f"b{block}_relu1"),
                       ("Conv2d", f"b{block}_conv2", conv), ("BatchNorm2d", f"b{block}_bn2"), start=x)
        short = x
        if down:
            short = g.chain(("Conv2d", f"b{block}_down", {"out_channels": out, "kernel_size": 1, "stride": 2}),
                            start=x)
        g.add_node("Add", f"b{block}_add")
        g.connect(main, f"b{block}_add")
        g.connect(short, f"b{block}_add")
        x = g.chain(("ReLU", f"b{block}_relu2"), start=f"b{block}_add")
        channels, block = out, block + 1
    x = g.chain(("AdaptiveAvgPool2d", "pool"), ("Flatten", "flatten"), start=x)
    for i in range(target_nodes - len(g) - 2):  # exact node count: pad the head with dropout layers
        x = g.chain(("Dropout", f"head_dropout{i}", {"p": 0.1}), start=x)
    g.chain(("Linear", "fc", {"out_features": 100}), ("Output", "output"), start=x)
    return g


def median_ms(fn: Callable[[], object], runs: int, before: Callable[[], object] | None = None) -> float:
    times = []
    for _ in range(runs):
        if before is not None:
            before()
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def pytorch_way(graph: Graph) -> tuple[int, int]:
    """What one would do without the studio: a meta module, a forward pass, the FLOP counter."""
    module = build_module(graph, batch=BATCH, device="meta")
    with FlopCounterMode(display=False) as counter:
        module(example_input(graph, BATCH, device="meta"))
    return counter.get_total_flops(), sum(p.numel() for p in module.parameters())


def bench(target: int, runs: int) -> None:
    graph = residual_net(target)
    a = analyze(graph, BATCH)
    flops, params = pytorch_way(graph)
    agree = "agree" if (a.total_flops, a.total_params) == (flops, params) else "DISAGREE"
    baseline = median_ms(lambda: pytorch_way(graph), runs)
    rows = [
        ("validate()", median_ms(lambda: validate(graph, BATCH), runs)),
        ("analyze() cold", median_ms(lambda: analyze(graph, BATCH), runs, before=_param_count.cache_clear)),
        ("analyze() warm", median_ms(lambda: analyze(graph, BATCH), runs)),
    ]
    print(f"\n{len(graph)} nodes, batch {BATCH}: {a.total_params:,} params, {a.total_flops / 1e9:.2f} GFLOPs "
          f"(figures {agree} with FlopCounterMode)")
    print(f"  {'meta build + forward + FlopCounterMode':40s} {baseline:8.2f} ms   (baseline)")
    for name, ms in rows:
        print(f"  {name:40s} {ms:8.2f} ms   {baseline / ms:6.1f}x faster than the baseline")


def main() -> None:
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread; medians of several runs")
    pytorch_way(residual_net(20))  # warm up torch's lazy imports and dispatch caches for both sides
    bench(100, runs=15)
    bench(300, runs=7)


if __name__ == "__main__":
    main()
