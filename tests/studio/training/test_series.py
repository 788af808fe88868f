"""The curve buffer's min/max pyramid and its peak decimation, against brute force."""

from __future__ import annotations

import numpy as np
import pytest

from studio.training.series import LEVELS, SeriesBuffer


def _filled(n: int, chunks: int = 37, seed: int = 0) -> SeriesBuffer:
    rng = np.random.default_rng(seed)
    b = SeriesBuffer(capacity=16)
    x = np.arange(n, dtype=float)
    y = np.sin(x / 700) + rng.normal(0, 0.2, n)
    for part in np.array_split(np.arange(n), chunks):   # appended in uneven pieces, as events come
        b.extend(x[part], y[part])
    return b


def test_each_drawn_bin_is_the_minimum_and_maximum_of_its_points_at_every_pyramid_level():
    """What a plot draws at each level's resolution, against brute force: every bin (a repeated x) is
    the minimum then the maximum of the points from its x up to the next drawn x."""
    b = _filled(100_003)
    for per_bin in (4, *LEVELS):                            # 4: from the points themselves
        xs, ys = b.decimated(target=2 * len(b) // per_bin)
        pairs = [i for i in range(len(xs) - 1) if xs[i] == xs[i + 1]]
        assert len(pairs) > 10
        for i in pairs:
            end = xs[i + 2] if i + 2 < len(xs) else len(b)
            points = b.y[int(xs[i]):int(end)]
            assert (ys[i], ys[i + 1]) == (points.min(), points.max()), (per_bin, xs[i])
    b.clear()
    assert len(b) == 0 and len(b.decimated()[0]) == 0
    b.extend(np.arange(50_000.0), np.full(50_000, 7.0))   # blocks left from the old series would show
    assert set(b.decimated(target=100)[1]) == {7.0}


@pytest.mark.parametrize(("x0", "x1", "target"), [
    (-np.inf, np.inf, 4000), (-np.inf, np.inf, 100), (12_345.5, 87_654.2, 3000), (500, 520, 4000),
    (99_000, np.inf, 1000), (-50, 3, 10)])
def test_decimation_keeps_the_extremes_of_the_window_in_about_target_points(x0, x1, target):
    b = _filled(100_003)
    xs, ys = b.decimated(x0, x1, target)
    i0 = max(int(np.searchsorted(b.x, x0)) - 1, 0)
    i1 = min(int(np.searchsorted(b.x, x1, "right")) + 1, len(b))
    window = b.y[i0:i1]
    assert len(xs) == len(ys) <= max(target, 0) * 1.1 + 200
    assert ys.min() == window.min() and ys.max() == window.max()   # no peak lost
    assert xs[0] == b.x[i0] and xs[-1] <= b.x[i1 - 1] and np.all(np.diff(xs) >= 0)
    assert set(np.round(ys, 12)) <= set(np.round(window, 12))      # only real values, none made up
    if i1 - i0 <= target:
        assert np.array_equal(xs, b.x[i0:i1])                       # few points: all of them


def test_a_nan_does_not_hide_the_rest_of_its_block():
    b = SeriesBuffer()
    y = np.linspace(0, 1, 10_000)
    y[5] = np.nan
    b.extend(np.arange(10_000), y)
    _, ys = b.decimated(target=100)
    assert np.nanmax(ys) == 1.0 and np.nanmin(ys) == 0.0
