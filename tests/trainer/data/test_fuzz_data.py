"""Fuzz: datasets made of odd pieces (CSV text, npz arrays of any dtype and shape) are read and split,
or refused with one DataError naming the file; never another exception.

Bounded for ``make test``: fixed example counts, no deadline (the machine may be shared).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainer.data import DataError, load_raw, prepare

CELLS = st.sampled_from(["1", "2.5", "x", "y", "-3", "", "nan", "inf", "1e300", "1e-300", "x", "y", "caf\u00e9", " 4 ",
                         '"a,b"', "0x10", "1_000", "\u00a0", "NaN", "True"])


@st.composite
def tables(draw) -> list[list[str]]:
    """A header and rows, mostly well formed (a sensible first draw gets deep into the reader)."""
    header = draw(st.lists(st.sampled_from(["a", "b", "c", "kind"]), min_size=1, max_size=4,
                           unique=draw(st.sampled_from([True, True, True, False]))))
    width = st.just(len(header)) if draw(st.sampled_from([True, True, True, False])) else st.integers(0, 5)
    rows = draw(st.lists(width.flatmap(lambda w: st.lists(CELLS, min_size=w, max_size=w)), max_size=10))
    return [header, *rows]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                    HealthCheck.function_scoped_fixture])
@given(table=tables(), encoding=st.sampled_from(["utf-8", "utf-8", "latin-1", "utf-8-sig"]),
       target=st.sampled_from(["", "kind", "b"]))
@pytest.mark.slow
def test_any_csv_reads_and_splits_or_is_one_data_error(tmp_path, table, encoding, target):
    text = "\n".join(",".join(r) for r in table) + "\n"
    path = tmp_path / "t.csv"
    path.write_bytes(text.encode(encoding, "replace"))
    _read_and_split(str(path), "csv", target)


DTYPES = st.sampled_from([np.uint8, np.int64, np.float64, np.float32, np.float16, np.bool_, np.complex64, "U3"])


@st.composite
def arrays(draw, rows: st.SearchStrategy[int], min_dims: int = 1) -> np.ndarray:
    n = draw(rows)
    shape = (n, *draw(st.lists(st.integers(1, 3), min_size=min_dims - 1, max_size=3)))
    dtype = draw(DTYPES)
    values = draw(st.sampled_from([0, 1, -1, 7, 300, 1e300, float("nan")]))
    with np.errstate(all="ignore"):
        base = np.arange(int(np.prod(shape))).reshape(shape) % 3
        try:
            return (base * values).astype(dtype) if draw(st.booleans()) else base.astype(dtype)
        except (ValueError, OverflowError):
            return base.astype(dtype)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                    HealthCheck.function_scoped_fixture])
@pytest.mark.slow
@given(data=st.data())
def test_any_npz_reads_and_splits_or_is_one_data_error(tmp_path, data):
    n = data.draw(st.integers(0, 12))
    rows = st.just(n) if data.draw(st.sampled_from([True, True, False])) else st.integers(0, 12)
    y = data.draw(arrays(rows)) if data.draw(st.sampled_from([False, False, True])) else \
        np.arange(n, dtype=data.draw(st.sampled_from([np.int64, np.uint8, np.int32]))) % data.draw(st.integers(1, 4))
    parts = {"x": data.draw(arrays(st.just(n), 2)), "y": y}
    for key in data.draw(st.lists(st.sampled_from(["x_test", "y_test", "classes"]), unique=True, max_size=3)):
        parts[key] = data.draw(arrays(st.integers(0, 5), 2 if key == "x_test" else 1))
    np.savez(tmp_path / "d.npz", **parts)
    _read_and_split(str(tmp_path / "d.npz"), "npz", "")


def _read_and_split(path: str, fmt: str, target: str) -> None:
    try:
        raw = load_raw(path, fmt, target=target)
    except DataError as exc:
        assert path in str(exc) and len(str(exc)) < 1000
        return
    assert len(raw.classes) >= 2 and len(raw.x) == len(raw.y) > 0
    assert raw.y.min() >= 0 and raw.y.max() < len(raw.classes)
    if raw.x.dtype.kind == "f":
        assert np.isfinite(raw.x).all()
    try:
        splits = prepare(raw, val_fraction=0.2, test_fraction=0.2, seed=0)
    except DataError as exc:                       # too few rows for the fractions: said, not crashed
        assert "empty" in str(exc)
        return
    assert splits.train.x.dtype.is_floating_point and not splits.train.x.isnan().any()
