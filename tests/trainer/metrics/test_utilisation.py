"""MFU from the graph's FLOP count and the share of time spent waiting on data (the GPU benchmark's)."""

from __future__ import annotations

import time

import pytest

from graph_editor.analysis import analyze
from graph_editor.model import load_graph
from trainer.metrics.utilisation import DataWait, mfu, peak_tflops

from ..helpers import ROOT


def test_peaks_by_device_name():
    assert peak_tflops("NVIDIA H200") == 989.0
    assert peak_tflops("NVIDIA H100 PCIe") == 756.0 and peak_tflops("NVIDIA H100 80GB HBM3") == 989.0
    assert peak_tflops("NVIDIA A100-SXM4-40GB") == 312.0
    assert peak_tflops("NVIDIA L40S") == 362.0 and peak_tflops("NVIDIA L4") == 121.0
    assert peak_tflops("Some Future GPU") is None


def test_mfu_of_resnet18_cifar_from_its_graph():
    """The H200 run of docs/gpu.md: 41,754 samples/s compiled bf16 is about 14% of 989 TFLOP/s."""
    flops = analyze(load_graph(ROOT / "assets" / "templates" / "resnet18_cifar.graph.json")).total_flops
    assert 1.0e9 < flops < 1.2e9                       # 1.11 GFLOP forward per sample
    assert mfu(flops, 41_754, 989.0) == pytest.approx(0.14, abs=0.005)
    assert mfu(flops, 0, 989.0) == 0.0
    with pytest.raises(ValueError, match="peak 0"):
        mfu(flops, 1.0, 0.0)


def test_data_wait_counts_only_the_time_in_next():
    def slow_batches():
        for k in range(3):
            time.sleep(0.02)                           # the loader's own time
            yield k

    wait = DataWait()
    t0 = time.perf_counter()
    seen = []
    for batch in wait.wrap(slow_batches()):
        time.sleep(0.05)                               # the step's time: not the data's
        seen.append(batch)
    total = time.perf_counter() - t0
    assert seen == [0, 1, 2]
    assert 0.06 <= wait.seconds < total - 0.14
