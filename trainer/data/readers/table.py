"""CSV tables (``.csv``, or gzipped ``.csv.gz``): numeric columns as they are, others one-hot."""

from __future__ import annotations

import csv
import gzip
import zlib
from pathlib import Path

import numpy as np

from ..formats import DataError, RawData, ReadOptions, dataset_format

NEWLINE = b"\n"


@dataset_format("csv", detect=lambda p: p.is_file() and p.name.lower().endswith((".csv", ".csv.gz")))
def read_csv(path: Path, options: ReadOptions) -> RawData:
    """A header row, then one sample a row; the target column (default: the last) holds the class."""
    rows = _rows(path)
    if len(rows) < 2:
        raise DataError(f"{path}: needs a header row and at least one data row")
    header, body = [h.strip() for h in rows[0][1]], rows[1:]
    _unique_names(header, path)
    for line, r in body:
        if len(r) != len(header):
            raise DataError(f"{path}: line {line} has {len(r)} values, the header has {len(header)}")
    target = options.target or header[-1]
    if target not in header:
        raise DataError(f"{path}: no target column '{target}' (columns: {', '.join(header)})")
    t = header.index(target)
    lines = [line for line, _ in body]
    columns, names = [], []
    for j, name in enumerate(header):
        if j != t:
            values, value_names = _column(name, [r[j].strip() for _, r in body], lines, path)
            columns.append(values)
            names.extend(value_names)
    if not columns:
        raise DataError(f"{path}: no feature columns besides the target '{target}'")
    labels = [r[t].strip() for _, r in body]
    if "" in labels:
        line = lines[labels.index("")]
        raise DataError(f"{path}: line {line} has no value in the target column '{target}' "
                        f"({labels.count('')} row(s) without a class): fill or remove them")
    classes = _sorted_names(set(labels))
    index = {c: i for i, c in enumerate(classes)}
    y = np.array([index[v] for v in labels], dtype=np.int64)
    return RawData(np.concatenate(columns, axis=1), y, classes, features=names)


def _rows(path: Path) -> list[tuple[int, list[str]]]:
    """(line number, values) of every non-empty row; an unreadable file is a DataError naming why."""
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8-sig", newline="") as f:
            reader = csv.reader(f)
            return [(reader.line_num, r) for r in reader if r]
    except UnicodeDecodeError as exc:
        line = _line_of(path, opener, exc)
        raise DataError(f"{path}: is not UTF-8 text (byte 0x{exc.object[exc.start]:02x}{line}); "
                        "save it as UTF-8 (e.g. 'CSV UTF-8' in a spreadsheet)") from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise DataError(f"{path}: a damaged or truncated gzip file ({exc or type(exc).__name__})") from None
    except csv.Error as exc:
        raise DataError(f"{path}: not a CSV table ({exc})") from None


def _line_of(path: Path, opener, exc: UnicodeDecodeError) -> str:
    """' on line N' for a decoding error (the decoder only knows the offset in its own chunk)."""
    try:
        with opener(path, "rb") as f:
            data = f.read()
        data.decode("utf-8-sig")
    except UnicodeDecodeError as whole:
        return f" on line {data.count(NEWLINE, 0, whole.start) + 1}"
    except (OSError, EOFError, zlib.error):
        pass
    return ""


def _unique_names(header: list[str], path: Path) -> None:
    seen: dict[str, int] = {}
    for j, name in enumerate(header):
        if name in seen:
            raise DataError(f"{path}: columns {seen[name] + 1} and {j + 1} are both named '{name}'; "
                            "rename one (the target and features are chosen by name)")
        seen[name] = j


def _column(name: str, values: list[str], lines: list[int], path: Path) -> tuple[np.ndarray, list[str]]:
    """A numeric column as float32 (checked finite, by line), or a text column one-hot."""
    try:
        floats = np.array([float(v) for v in values], dtype=np.float64)
    except ValueError:
        floats = None
    if floats is not None:
        with np.errstate(over="ignore"):
            column = floats.astype(np.float32)
        bad = np.flatnonzero(~np.isfinite(column))
        if bad.size:
            i = int(bad[0])
            why = "is beyond float32's range of 3.4e38" if np.isfinite(floats[i]) else "is not a number"
            raise DataError(f"{path}: column '{name}', line {lines[i]}: {values[i]!r} {why} "
                            f"({bad.size} such value(s) in the column): remove or fill them")
        return column[:, None], [name]
    if any(v == "" for v in values) and all(_is_number(v) for v in values if v):
        raise DataError(f"{path}: column '{name}' is numeric but line {lines[values.index('')]} is empty")
    cats = _sorted_names(set(values))
    index = {c: i for i, c in enumerate(cats)}
    onehot = np.zeros((len(values), len(cats)), dtype=np.float32)
    onehot[np.arange(len(values)), [index[v] for v in values]] = 1.0
    return onehot, [f"{name}={c}" for c in cats]


def _is_number(v: str) -> bool:
    try:
        float(v)
    except ValueError:
        return False
    return True


def _sorted_names(names: set[str]) -> list[str]:
    return sorted(names, key=lambda s: (0, float(s), s) if _is_number(s) else (1, 0.0, s))
