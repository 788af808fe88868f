"""One-off: write ``assets/data/digits.npz`` from the copy of the UCI digits in scikit-learn's wheel.

Usage::

    pip download scikit-learn --no-deps -d /tmp/skl
    python tools/make_digits.py /tmp/skl/scikit_learn-*.whl

The wheel is only read as a zip file; scikit-learn is never installed or imported. The result is
1,797 uint8 images of 8x8 pixels (values 0..16) and their int64 labels 0..9.
"""

from __future__ import annotations

import gzip
import io
import sys
import zipfile
from pathlib import Path

import numpy as np

MEMBER = "sklearn/datasets/data/digits.csv.gz"
OUT = Path(__file__).resolve().parents[1] / "assets" / "data" / "digits.npz"


def read_digits(wheel: Path) -> tuple[np.ndarray, np.ndarray]:
    with zipfile.ZipFile(wheel) as zf:
        raw = gzip.decompress(zf.read(MEMBER))
    table = np.loadtxt(io.BytesIO(raw), delimiter=",", dtype=np.int64)
    if table.shape != (1797, 65):
        raise SystemExit(f"unexpected table shape {table.shape} in {wheel}")
    images = table[:, :64].reshape(-1, 8, 8)
    if images.min() < 0 or images.max() > 16:
        raise SystemExit("pixel values outside 0..16")
    return images.astype(np.uint8), table[:, 64].astype(np.int64)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__)
        return 2
    images, labels = read_digits(Path(argv[0]))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT, images=images, labels=labels)
    print(f"wrote {OUT.name}: {images.shape[0]} images, classes {np.bincount(labels).tolist()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
