"""Small rooms: no product module grows past 450 lines (the house rule; a longer one is split by concern)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("graph_editor", "trainer", "exporters", "studio")
LIMIT = 450


def test_every_product_module_is_at_most_450_lines():
    long = {str(p.relative_to(ROOT)): n for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > LIMIT}
    assert not long, f"modules over {LIMIT} lines (split them by concern): {long}"

