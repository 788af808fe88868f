"""Export reports: the checks that prove an export, its figures, saved as JSON and readable text.

Comparisons follow ``torch.testing``'s rule, an output element passes when
``|actual - expected| <= atol + rtol * |expected|``, with one term for float32 itself:
``+ scale_rtol * max|expected of its sample|`` (see :data:`SCALE_RTOL`).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from graph_editor.model.units import mib

# Float32 error grows with the magnitude of what was summed, not of the one value summed to: a logit
# near 0 that is the difference of terms at 1e8 carries an error of tens of ulps of 1e8 in any two
# correct float32 implementations (an untrained inception_v3 in eval mode: logits to 1.4e8, two logits
# of 8797 and 101086 off by 80 and 149 in onnxruntime, 18-20 ulps of the largest). So each value is
# also allowed SCALE_RTOL of its sample's largest magnitude: 84 float32 ulps of it, a hundredth of what
# rtol already allows that largest value. Logits of size 1-10 gain 1e-5 to 1e-4 near 0, nothing more.
SCALE_RTOL = 1e-5


@dataclass
class Check:
    """One verification step and its outcome."""

    name: str
    passed: bool
    detail: str = ""


@dataclass
class Comparison:
    """Outputs of an exported model against PyTorch on the same inputs."""

    max_abs_diff: float
    allclose: bool
    top1_agreement: float | None
    elements: int
    mismatched: int

    def check(self, name: str, rtol: float, atol: float, scale_rtol: float = SCALE_RTOL) -> Check:
        top1 = "" if self.top1_agreement is None else f", top-1 agreement {self.top1_agreement:.1%}"
        if math.isnan(self.max_abs_diff):
            return Check(name, False, "the outputs contain NaN: there is nothing to compare (diverged weights?)")
        verdict = "within" if self.allclose else f"{self.mismatched} of {self.elements} values outside"
        scale = f" / {scale_rtol:g} of the sample's largest" if scale_rtol else ""
        return Check(name, self.allclose, f"max abs diff {self.max_abs_diff:.3g} ({verdict} rtol {rtol:g} / "
                                          f"atol {atol:g}{scale}){top1}")


def compare_outputs(expected: Any, actual: Any, rtol: float, atol: float,
                    scale_rtol: float = SCALE_RTOL) -> Comparison:
    """Compare two logit arrays (torch tensors or numpy arrays) element by element and by top-1 class;
    ``scale_rtol`` of each sample's largest finite ``|expected|`` is float32's error at that scale."""
    e = _numpy(expected).astype(np.float64)
    a = _numpy(actual).astype(np.float64)
    if e.shape != a.shape:
        return Comparison(float("inf"), False, None, int(e.size), int(e.size))
    diff = np.abs(a - e)
    finite = np.where(np.isfinite(e), np.abs(e), 0.0)
    scale = finite.reshape(len(e), -1).max(1).reshape(-1, *[1] * (e.ndim - 1)) if e.ndim >= 2 and e.size else (
        finite.max() if e.size else 0.0)
    bad = ~(diff <= atol + rtol * np.abs(e) + scale_rtol * scale)  # NaN counts as a mismatch
    top1 = None
    if e.ndim == 2 and e.shape[1] > 1:
        top1 = float(np.mean(e.argmax(1) == a.argmax(1)))
    max_diff = float(np.nanmax(diff)) if diff.size and not np.isnan(diff).all() else 0.0
    if np.isnan(diff).any():
        max_diff = float("nan")
    return Comparison(max_diff, not bool(bad.any()), top1, int(e.size), int(bad.sum()))


def _numpy(x: Any) -> np.ndarray:
    if hasattr(x, "detach"):
        return x.detach().float().cpu().numpy()
    return np.asarray(x)


WARMUP_CALLS = 5  # at most; a first eager call in a fresh thread can cost 100x a warm one


def median_ms(fn: Callable[[], object], runs: int = 10, budget_s: float = 1.0) -> float:
    """Median wall time of ``fn`` in milliseconds once it is warm: warm-up calls until two in a row
    take about the same time (at most WARMUP_CALLS or ``budget_s``/2), then up to ``runs`` timed
    calls (stopping early after ``budget_s``). Both sides of a latency comparison use it, so the
    ratio compares warm medians (one warm-up call left eager at 75 ms against 0.9 ms in the CLI)."""
    warm_start, last = time.perf_counter(), None
    for _ in range(WARMUP_CALLS):
        t0 = time.perf_counter()
        fn()
        took = time.perf_counter() - t0
        if last is not None and took <= 1.25 * last and last <= 1.25 * took:
            break
        last = took
        if time.perf_counter() - warm_start > budget_s / 2:
            break
    times: list[float] = []
    start = time.perf_counter()
    for _ in range(max(1, runs)):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if time.perf_counter() - start > budget_s:
            break
    return float(np.median(times) * 1e3)


def latencies(runs: int, **calls: Callable[[], object]) -> dict[str, float]:
    """``{name: median_ms(call)}`` for each call; none when ``runs`` is 0 (the proof without its timing:
    on a large model the warm-up and timed calls of both sides cost more than the parity check itself)."""
    return {name: median_ms(call, runs) for name, call in calls.items()} if runs > 0 else {}


def files_size(paths: list[Path]) -> int:
    """Total bytes of files, counting every file inside a folder."""
    total = 0
    for p in paths:
        if p.is_dir():
            total += sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
        elif p.exists():
            total += p.stat().st_size
    return total


@dataclass
class ExportReport:
    """What was exported, from what, and the proof. ``ok`` is False when any check failed."""

    format: str
    path: str
    source: str
    files: list[str] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    verified: bool = True
    created: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    report_files: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def failed_checks(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, **asdict(self)}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, default=str)

    def to_text(self) -> str:
        """The report as a person reads it: verdict, files, checks, figures, notes."""
        if not self.verified:
            verdict = "NOT VERIFIED (--no-verify)"
        else:
            verdict = "PASSED" if self.ok else "FAILED"
        lines = [f"{self.format} export {verdict}", f"  source: {self.source}", f"  file:   {self.path}"]
        lines += [f"  also:   {f}" for f in self.files if f != self.path]
        if self.checks:
            lines.append("checks:")
            lines += [f"  [{'ok' if c.passed else 'FAIL'}] {c.name}: {c.detail}" for c in self.checks]
        if self.metrics:
            lines.append("figures:")
            lines += [f"  {k}: {_fmt(k, v)}" for k, v in self.metrics.items()]
        if self.notes:
            lines.append("notes:")
            lines += [f"  {n}" for n in self.notes]
        return "\n".join(lines) + "\n"

    def save(self, beside: Path) -> list[Path]:
        """Write ``<beside>.report.json`` and ``<beside>.report.txt``; returns both paths."""
        json_path = beside.with_name(beside.name + ".report.json")
        text_path = beside.with_name(beside.name + ".report.txt")
        self.report_files = [str(json_path), str(text_path)]
        _atomic_write(json_path, self.to_json() + "\n")
        _atomic_write(text_path, self.to_text())
        return [json_path, text_path]


def _fmt(key: str, value: Any) -> str:
    if key.endswith("_bytes") and isinstance(value, int):
        return f"{value:,} bytes ({mib(value, 2)})"
    if key == "top1_agreement" and isinstance(value, float):
        return f"{value:.1%}"
    if key.endswith("_ms") and isinstance(value, float):
        return f"{value:.3f} ms"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def accuracy_check(expected: Any, actual: Any, labels: Any) -> tuple[Check, dict[str, float]]:
    """Accuracy of the exported model on labelled raw samples against PyTorch's on the same samples
    standardised as in training: the two agree to within one sample. A model that lost its
    preprocessing scores far off (a digits model fed raw pixels: 56.5% against 99.8%)."""
    y = _numpy(labels).reshape(-1)
    ref = float(np.mean(_numpy(expected).argmax(1) == y)) if len(y) else 0.0
    got = float(np.mean(_numpy(actual).argmax(1) == y)) if len(y) else 0.0
    n = max(len(y), 1)
    passed = abs(ref - got) <= 1.0 / n + 1e-9
    detail = (f"{got:.1%} for the exported model on {len(y)} raw samples, {ref:.1%} for PyTorch on them "
              f"standardised as in training" + ("" if passed else ": the export does not preprocess as training did"))
    return Check("accuracy on raw samples", passed, detail), {"accuracy": got, "pytorch_accuracy": ref}
