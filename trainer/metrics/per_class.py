"""Per-class precision, recall, F1 and support from a confusion matrix: the one place they are computed.

The worker sends them with every ``epoch_end`` (and the test figures with ``finished``) and stores
them in the epoch reports; the studio shows what it was sent, and computes them here only for a
matrix it made itself (a checkpoint re-evaluated on the CPU). NumPy only: no torch, no Qt.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..protocol.events import PerClass


def per_class(confusion: Any) -> PerClass:
    """Rows of ``confusion`` are true classes, columns predicted. A class never predicted has precision
    0 (not NaN), one without samples recall 0, so every figure is a number; rounded to 6 decimals."""
    c = np.asarray(confusion, dtype=np.float64)
    if c.ndim != 2 or c.shape[0] != c.shape[1]:
        raise ValueError(f"a confusion matrix must be square, got shape {c.shape}")
    tp, predicted, actual = np.diag(c), c.sum(axis=0), c.sum(axis=1)
    precision = np.divide(tp, predicted, out=np.zeros_like(tp), where=predicted > 0)
    recall = np.divide(tp, actual, out=np.zeros_like(tp), where=actual > 0)
    denom = precision + recall
    f1 = np.divide(2 * precision * recall, denom, out=np.zeros_like(tp), where=denom > 0)
    return PerClass(_rounded(precision), _rounded(recall), _rounded(f1), [int(v) for v in actual])


def _rounded(a: np.ndarray) -> list[float]:
    return [round(float(v), 6) for v in a]
