"""How well a run uses its GPU: model FLOP utilisation and the share of time spent waiting on data.

* :func:`mfu`: the FLOPs a training step needs by the graph's own count (forward FLOPs per sample from
  ``graph_editor.analysis.analyze``, training taken as 3x the forward: the backward computes the input's
  and the weights' gradients, each as costly as the forward), over the GPU's dense bf16/fp16 peak
  (:func:`peak_tflops`, from the vendors' datasheets).
* :class:`DataWait`: host seconds spent inside a batch iterator's ``next``, to set against the epoch's
  seconds. With batches gathered on the GPU the host only queues the gather there, so the share is
  what the data path adds to a step when the host sets the pace: the issue's goal keeps it under 2%.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")

# Dense bf16/fp16 tensor-core peaks, TFLOP/s (without sparsity); the longer name first where one
# contains another.
PEAKS_TFLOPS: tuple[tuple[str, float], ...] = (
    ("H200", 989.0), ("H100 PCIe", 756.0), ("H100", 989.0), ("A100", 312.0), ("L40S", 362.0), ("L4", 121.0),
)


def peak_tflops(device_name: str) -> float | None:
    """The dense bf16 peak of the GPU named ``device_name`` (``torch.cuda.get_device_name()``), or None
    for a GPU not in :data:`PEAKS_TFLOPS`."""
    return next((peak for key, peak in PEAKS_TFLOPS if key in device_name), None)


def mfu(forward_flops_per_sample: float, samples_per_s: float, peak: float) -> float:
    """Model FLOP utilisation: training FLOPs done per second (3x the forward's) over ``peak`` TFLOP/s."""
    if forward_flops_per_sample < 0 or samples_per_s < 0 or peak <= 0:
        raise ValueError(f"mfu: flops {forward_flops_per_sample}, samples/s {samples_per_s} and peak {peak} "
                         "must be non-negative, the peak positive")
    return 3.0 * forward_flops_per_sample * samples_per_s / (peak * 1e12)


class DataWait:
    """Sums the host seconds spent getting the next batch from the iterators it wraps."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def wrap(self, batches: Iterable[T]) -> Iterator[T]:
        it = iter(batches)
        while True:
            t0 = time.perf_counter()
            try:
                item = next(it)
            except StopIteration:
                self.seconds += time.perf_counter() - t0
                return
            self.seconds += time.perf_counter() - t0
            yield item
