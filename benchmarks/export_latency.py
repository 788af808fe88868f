"""Exported models against PyTorch eager on the same machine, in the same run.

For each template: export to ONNX (opset 20, dynamic batch) and run onnxruntime (CPU provider)
and the eager module on the same batch, at batch 1 and batch 16; prints the median latencies,
the ratio eager / onnxruntime (above 1: onnxruntime is faster), the max abs difference, and how
long the export plus its proof took. ``python benchmarks/export_latency.py [TEMPLATE ...]``.
No assertions: the machine may be shared and noisy.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import onnxruntime as ort  # noqa: E402
import torch  # noqa: E402

from exporters import ExportOptions, compare_outputs, export, from_graph  # noqa: E402
from exporters.report import median_ms  # noqa: E402
from graph_editor.model import load_graph  # noqa: E402

DEFAULT = ("mlp", "lenet5", "digits_cnn", "resnet18_cifar", "mobilenet_v2", "resnet18", "vit_tiny")


def bench(name: str, out: Path) -> None:
    source = from_graph(load_graph(ROOT / "assets" / "templates" / f"{name}.graph.json"))
    t = time.perf_counter()
    report = export(source, "onnx", out / f"{name}.onnx", ExportOptions(timing_runs=3))
    seconds = time.perf_counter() - t
    session = ort.InferenceSession(report.path, providers=["CPUExecutionProvider"])
    feed_name = session.get_inputs()[0].name
    for batch in (1, 16):
        x = source.example(batch, seed=11)
        eager = median_ms(lambda x=x: source.reference(x), runs=10, budget_s=3.0)
        onnx = median_ms(lambda x=x: session.run(None, {feed_name: x.numpy()}), runs=10, budget_s=3.0)
        diff = compare_outputs(source.reference(x), session.run(None, {feed_name: x.numpy()})[0], 1e-3, 1e-5)
        print(f"{name:15s} {batch:5d} {eager:10.2f} {onnx:10.2f} {eager / onnx:7.2f}x {diff.max_abs_diff:10.2e} "
              f"{'ok' if report.ok else 'FAILED':>6s} {seconds:7.1f} s")


def main(argv: list[str]) -> int:
    torch.set_grad_enabled(False)
    print(f"torch {torch.__version__}, onnxruntime {ort.__version__}, {torch.get_num_threads()} torch threads")
    print(f"{'template':15s} {'batch':>5s} {'eager ms':>10s} {'ort ms':>10s} {'ratio':>8s} {'max diff':>10s} "
          f"{'proof':>6s} {'export':>9s}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in argv or DEFAULT:
            bench(name, Path(tmp))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
