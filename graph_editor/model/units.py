"""Counts and bytes as people read them, and the byte unit: one place for the canvas, the studio and the
trainer's messages (pure Python, no torch)."""

from __future__ import annotations

MiB = 2 ** 20


def count(n: float) -> str:
    """1234567 -> '1.23M', 12345 -> '12.3K'; below a thousand the plain number (parameters, FLOPs)."""
    for suffix in ("", "K", "M", "G", "T"):
        if abs(n) < 1000 or suffix == "T":
            return f"{n:.0f}" if suffix == "" else f"{n:.3g}{suffix}"
        n /= 1000
    return f"{n:g}"


def nbytes(n: float) -> str:
    """Bytes with binary prefixes: 1536 -> '1.50 KiB'."""
    for suffix in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or suffix == "GiB":
            return f"{n:.0f} B" if suffix == "B" else f"{n:.2f} {suffix}"
        n /= 1024
    return f"{n:.2f} GiB"


def mib(n: float, digits: int = 1) -> str:
    """Bytes in MiB, the memory figures' one unit: 2097152 -> '2.0 MiB'."""
    return f"{n / MiB:.{digits}f} MiB"

