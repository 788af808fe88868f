"""The ``memory`` event's figures: the process's RSS on a CPU, the allocator's counters on CUDA."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from trainer.memory.samples import memory_sample
from trainer.protocol import events as ev


def test_cpu_sample_is_the_resident_set():
    s = memory_sample(torch.device("cpu"), step=4)
    assert isinstance(s, ev.Memory) and s.step == 4 and not s.cuda
    assert s.device == "cpu" and s.rss is not None and s.peak_rss is not None and s.rss > 0 and s.peak_rss >= s.rss // 2
    assert s.counters() == {"device": "cpu", "rss": s.rss, "peak_rss": s.peak_rss}   # a failed event's memory


def test_cuda_fields_travel_in_the_typed_event():
    line = ev.Memory(step=3, device="cuda:0", allocated=10, reserved=20, peak=15, active=10, inactive_split=4,
                     alloc_retries=1, num_ooms=0, free=100, total=200).to_json()
    back = ev.Event.from_json(line)
    assert isinstance(back, ev.Memory) and back.cuda and not back.extra
    assert (back.active, back.inactive_split, back.alloc_retries, back.num_ooms, back.free, back.total) == \
        (10, 4, 1, 0, 100, 200)
    cpu = json.loads(ev.Memory(step=1, device="cpu", rss=5, peak_rss=6).to_json())
    assert "active" not in cpu and "free" not in cpu


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_sample_has_the_allocator_counters():
    dev = torch.device("cuda")
    x = torch.empty(64 * 2 ** 20, dtype=torch.uint8, device=dev)
    s = memory_sample(dev).counters()
    assert s["allocated"] >= x.numel() and s["reserved"] >= s["allocated"] and s["active"] >= x.numel()
    assert 0 < s["free"] < s["total"] and s["num_ooms"] >= 0 and s["alloc_retries"] >= 0
    assert s["inactive_split"] >= 0


def test_the_peak_is_never_below_the_resident_memory_of_the_same_sample():
    """Linux's high-water mark (ru_maxrss) trails the RSS /proc counts now; a worker's first memory
    event after a resume showed peak_rss < rss. Allocations that grow and shrink, one sample after each."""
    keep: list[torch.Tensor] = []
    below = 0
    for i in range(100):
        keep.append(torch.ones(2**18 * (i % 7 + 1)))
        if i % 10 == 0:
            keep = keep[-3:]
        s = memory_sample(torch.device("cpu"))
        assert s.peak_rss is not None and s.rss is not None
        below += s.peak_rss < s.rss
    assert below == 0


@pytest.mark.process
def test_a_process_started_by_a_big_one_reports_its_own_peak():
    """getrusage's ru_maxrss keeps the mark of the process a child was started from (exec carries it over):
    a worker started by the studio reported the studio's RSS as its peak. The child here imports torch
    (~0.5 GB); its parent holds 1.5 GiB."""
    ballast = bytearray(b"\x01") * (1536 * 2**20)    # every page written: resident
    below = len(ballast) * 2 // 3
    probe = "from trainer.memory.samples import peak_rss_bytes, rss_bytes; print(peak_rss_bytes(), rss_bytes())"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).parents[3])
    peak, rss = map(int, out.stdout.split())
    assert rss <= peak < below, (peak, rss)
