"""Small rooms: no product module grows past 450 lines (the house rule; a longer one is split by concern),
and the trainer keeps its concerns in rooms."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("graph_editor", "trainer", "exporters", "studio")
LIMIT = 450


def test_every_product_module_is_at_most_450_lines():
    long = {str(p.relative_to(ROOT)): n for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > LIMIT}
    assert not long, f"modules over {LIMIT} lines (split them by concern): {long}"



def test_the_trainer_keeps_at_most_12_modules_at_its_top():
    """The trainer's concerns live in rooms (protocol, store, memory, distributed, checkpoints, data, ...):
    a new module goes into its room, and a new concern gets one, rather than the top growing back."""
    top = sorted(p.name for p in (ROOT / "trainer").glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert len(top) <= 12, f"trainer/ has {len(top)} modules at its top: {top}"
