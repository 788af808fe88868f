"""The proof every model format shares: the exported model on the source's samples (raw values, as
the dataset file holds them) against PyTorch on the same samples standardised as in training."""

from __future__ import annotations

from typing import Any

from .options import ExportOptions
from .report import Check, accuracy_check, compare_outputs
from .source import ExportSource


def parity(source: ExportSource, got: Any, options: ExportOptions, name: str,
           count: int | None = None) -> tuple[list[Check], dict[str, object]]:
    """Element-wise parity within tolerance, top-1 agreement and, for a run's labelled samples, accuracy
    agreement, of ``got`` (the exported model's outputs on the first ``count`` samples, all by default)."""
    inputs = source.samples[:count]
    expected = source.reference(inputs)
    comp = compare_outputs(expected, got, options.rtol, options.atol)
    checks = [comp.check(f"{name} (batch {len(inputs)})", options.rtol, options.atol)]
    figures: dict[str, object] = {"verify_batch": len(inputs), "max_abs_diff": comp.max_abs_diff,
                                  "top1_agreement": comp.top1_agreement}
    if source.labels is not None and len(source.labels) == len(source.samples):
        check, accuracy = accuracy_check(expected, got, source.labels[:count])
        checks.append(check)
        figures.update(accuracy)
    return checks, figures
