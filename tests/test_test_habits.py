"""Habits of the tests themselves, checked on their source."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_polling_loop_in_the_tests_has_a_deadline():
    """A ``while`` that sleeps or waits until something happens also stops at a deadline (or a count): a
    condition that never comes true fails the test instead of hanging the suite."""
    waits = re.compile(r"sleep\(|\.wait\(|processEvents")
    bounded = re.compile(r"deadline|monotonic|timeout|perf_counter|range|readline")
    loose = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            text = line.strip()
            if text.startswith("while ") and not bounded.search(text) and waits.search("".join(lines[i + 1:i + 4])):
                loose.append(f"{path.relative_to(ROOT)}:{i + 1}")
    assert loose == [], f"polling loops without a deadline: {loose}"
