"""One curve's points, and what of them to draw: peak decimation in time independent of the history.

A :class:`SeriesBuffer` keeps x/y in arrays that double when full, and beside them a small pyramid
of block minima and maxima (blocks of 16, 256 and 4,096 points), kept up to date as points arrive.
:meth:`SeriesBuffer.decimated` answers "what to draw for x in [x0, x1] in about ``target`` points"
from the coarsest level that still gives the resolution asked for, so its cost follows ``target``,
not the number of points: drawing a curve of ten million points costs about what drawing one of ten
thousand does. The shape survives: each output bin is drawn as its minimum and its maximum (peak
decimation, what pyqtgraph's ``peak`` mode does over all the points every time).

Pure NumPy; the plots (:mod:`studio.training.plots`) draw what it returns.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

LEVELS = (16, 256, 4096)   # points per block of each pyramid level (each level is 16x the one below)


class _Column:
    """A growing float64 array; ``view`` is the filled part."""

    def __init__(self, capacity: int) -> None:
        self._a = np.empty(max(capacity, 16), dtype=np.float64)
        self.n = 0

    @property
    def view(self) -> np.ndarray:
        return self._a[: self.n]

    def extend(self, values: np.ndarray) -> None:
        need = self.n + values.size
        if need > self._a.size:
            cap = self._a.size
            while cap < need:
                cap *= 2
            # np.resize would tile the old values into the new space: ten times slower at 1M points
            grown = np.empty(cap, dtype=np.float64)
            grown[: self.n] = self._a[: self.n]
            self._a = grown
        self._a[self.n:need] = values
        self.n = need


class SeriesBuffer:
    """Growing x/y arrays for one curve (``x`` non-decreasing); ``x`` and ``y`` are views of the
    filled part. Appending is amortised O(1) per point, the pyramid included."""

    def __init__(self, capacity: int = 1024) -> None:
        self._x, self._y = _Column(capacity), _Column(capacity)
        self._mins = [_Column(capacity // size + 1) for size in LEVELS]
        self._maxs = [_Column(capacity // size + 1) for size in LEVELS]

    def __len__(self) -> int:
        return self._x.n

    @property
    def x(self) -> np.ndarray:
        return self._x.view

    @property
    def y(self) -> np.ndarray:
        return self._y.view

    def extend(self, xs: Sequence[float] | np.ndarray, ys: Sequence[float] | np.ndarray) -> None:
        """Append points (and the pyramid blocks they complete)."""
        xs = np.asarray(xs, dtype=np.float64).ravel()
        ys = np.asarray(ys, dtype=np.float64).ravel()
        if xs.shape != ys.shape:
            raise ValueError(f"x and y differ in length: {xs.size} vs {ys.size}")
        self._x.extend(xs)
        self._y.extend(ys)
        lower_min = lower_max = self._y.view   # level 0 is the points themselves
        for level, size in enumerate(LEVELS):
            step = size // (LEVELS[level - 1] if level else 1)   # blocks of the level below per block
            mins, maxs = self._mins[level], self._maxs[level]
            done, complete = mins.n, len(self) // size
            if complete > done:
                lo, hi = done * step, complete * step
                mins.extend(_low(lower_min[lo:hi].reshape(-1, step)))
                maxs.extend(_high(lower_max[lo:hi].reshape(-1, step)))
            lower_min, lower_max = mins.view, maxs.view

    def append(self, x: float, y: float) -> None:
        self.extend((x,), (y,))

    def clear(self) -> None:
        self._x.n = self._y.n = 0
        for column in (*self._mins, *self._maxs):
            column.n = 0

    def y_at(self, x: float) -> float | None:
        """The y of the point nearest to ``x``, None when empty."""
        n = len(self)
        if n == 0:
            return None
        xs = self.x
        i = int(np.searchsorted(xs, x))
        if i >= n:
            i = n - 1
        elif i > 0 and abs(xs[i - 1] - x) <= abs(xs[i] - x):
            i -= 1
        return float(self._y.view[i])

    def decimated(self, x0: float = -np.inf, x1: float = np.inf, target: int = 4000,
                  ) -> tuple[np.ndarray, np.ndarray]:
        """The points to draw for x in [x0, x1] (plus one beyond each end, so the line reaches the
        border): all of them when there are at most ``target``; else about ``target`` points, the
        minimum and maximum of each of ``target / 2`` bins, read from the coarsest pyramid level that
        has blocks no wider than a bin."""
        x, y = self.x, self.y
        i0 = max(int(np.searchsorted(x, x0, "left")) - 1, 0)
        i1 = min(int(np.searchsorted(x, x1, "right")) + 1, len(self))
        count, bins = i1 - i0, max(target // 2, 1)
        if count <= target:
            return x[i0:i1], y[i0:i1]
        per_bin = count // bins                                  # points per output bin
        size = max((s for s in LEVELS if s <= per_bin), default=1)
        if size == 1:
            lows = highs = y
            first, end = i0, i1                                  # in points
        else:
            level = LEVELS.index(size)
            lows, highs = self._mins[level].view, self._maxs[level].view
            first, end = -(-i0 // size), i1 // size              # the whole blocks inside [i0, i1)
        k = max(per_bin // size, 1)                              # units (points or blocks) per bin
        n_bins = max((end - first) // k, 0)
        start, stop = first * size, (first + n_bins * k) * size  # the points the bins cover
        lo = _low(lows[first:first + n_bins * k].reshape(n_bins, k))
        hi = _high(highs[first:first + n_bins * k].reshape(n_bins, k))
        # Each bin drawn as its minimum and maximum at its first x. Before the first whole block
        # there are fewer points than a bin: as they are; after the last whole bin, up to two bins'
        # worth: binned from the points themselves.
        tail_x, tail_y = _peaks(x[stop:i1], y[stop:i1], per_bin)
        xs = np.concatenate([x[i0:start], np.repeat(x[start:stop:k * size], 2), tail_x])
        ys = np.concatenate([y[i0:start], np.column_stack([lo, hi]).ravel(), tail_y])
        return xs, ys


def _peaks(x: np.ndarray, y: np.ndarray, per_bin: int) -> tuple[np.ndarray, np.ndarray]:
    """Peak decimation of points: whole bins of ``per_bin`` as their minimum and maximum; the rest
    (less than a bin) in bins 16 times narrower, and so on down to single points."""
    xs, ys = [], []
    while per_bin >= 2 and len(x) > 2:
        n = len(x) // per_bin
        if n:
            end = n * per_bin
            body = y[:end].reshape(n, per_bin)
            xs.append(np.repeat(x[:end:per_bin], 2))
            ys.append(np.column_stack([_low(body), _high(body)]).ravel())
            x, y = x[end:], y[end:]
        per_bin //= 16
    return np.concatenate([*xs, x]), np.concatenate([*ys, y])


def _low(blocks: np.ndarray) -> np.ndarray:
    """Row minima ignoring NaN (NaN only where a whole row is), without numpy's all-NaN warning."""
    return np.fmin.reduce(blocks, axis=1)


def _high(blocks: np.ndarray) -> np.ndarray:
    return np.fmax.reduce(blocks, axis=1)
