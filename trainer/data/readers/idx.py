"""MNIST and Fashion-MNIST IDX files (``train-images-idx3-ubyte`` etc., optionally gzipped)."""

from __future__ import annotations

import gzip
import math
import zlib
from pathlib import Path

import numpy as np

from ..formats import DataError, RawData, ReadOptions, dataset_format


@dataset_format("idx", detect=lambda p: p.is_dir() and any("idx3-ubyte" in c.name for c in p.iterdir()))
def read_idx(path: Path, options: ReadOptions) -> RawData:
    """MNIST / Fashion-MNIST: ``train-images-idx3-ubyte`` etc., optionally gzipped, in ``path``."""
    def find(kind: str) -> Path:
        hits = sorted(p for p in path.rglob(f"*{kind}*") if p.is_file())
        if not hits:
            raise DataError(f"{path}: no file matching '*{kind}*' (MNIST IDX layout)")
        return hits[0]

    x = _idx_array(find("train-images-idx3"))[:, None]
    y = _idx_array(find("train-labels-idx1")).astype(np.int64)
    xt = _idx_array(find("t10k-images-idx3"))[:, None]
    yt = _idx_array(find("t10k-labels-idx1")).astype(np.int64)
    if len(x) != len(y) or len(xt) != len(yt):
        raise DataError(f"{path}: image and label files hold different counts")
    return RawData(x, y, [str(i) for i in range(int(max(y.max(), yt.max())) + 1)], xt, yt)


def _idx_array(path: Path) -> np.ndarray:
    raw = path.read_bytes()
    if path.suffix == ".gz":
        try:
            raw = gzip.decompress(raw)
        except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
            raise DataError(f"{path}: a damaged or truncated gzip file ({exc or type(exc).__name__})") from None
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise DataError(f"{path}: not an unsigned-byte IDX file")
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    offset = 4 + 4 * ndim
    if len(raw) - offset != math.prod(dims):  # Python integers: 4-byte dimensions cannot overflow
        raise DataError(f"{path}: holds {len(raw) - offset} bytes of data, the header says {dims}")
    return np.frombuffer(raw, dtype=np.uint8, offset=offset).reshape(dims)
