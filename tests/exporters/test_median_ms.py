"""Latency figures are medians of warm calls: slow first calls do not reach the figure."""

from __future__ import annotations

import time

from exporters.report import median_ms


def test_slow_first_calls_are_warm_up_not_measurements():
    calls = []

    def fn() -> None:
        calls.append(1)
        time.sleep(0.05 if len(calls) <= 3 else 0.001)   # three cold calls (a fresh thread, lazy init)

    ms = median_ms(fn, runs=5, budget_s=2.0)
    assert ms < 10, ms
    assert len(calls) >= 3 + 5 - 1


def test_warm_up_is_bounded():
    from exporters.report import WARMUP_CALLS

    calls = []
    median_ms(lambda: calls.append(1), runs=4)
    assert 2 + 4 <= len(calls) <= WARMUP_CALLS + 4
