"""How long the Train dialog's dataset view takes to read a big image folder: a folder of N small JPEGs
(10 classes), read as the dialog reads it (index + the samples shown), against a directory walk of the
same folder (``os.scandir`` of each class folder: what no reader can beat), in the same run.

    python benchmarks/dataset_view_open.py [--images 60000] [--folder DIR]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image


def make_folder(root: Path, n: int, classes: int = 10) -> None:
    rng = np.random.default_rng(0)
    root.mkdir(parents=True, exist_ok=True)
    encoded = []
    for c in range(classes):      # one JPEG per class, written n/classes times (writing is not what is measured)
        a = rng.integers(0, 255, (32, 32, 3), dtype=np.uint8)
        path = root / f"proto{c}.jpg"
        Image.fromarray(a).save(path, quality=90)
        encoded.append(path.read_bytes())
        path.unlink()
    for c in range(classes):
        d = root / f"class{c}"
        d.mkdir(parents=True, exist_ok=True)
        for i in range(n // classes):
            (d / f"{i:06d}.jpg").write_bytes(encoded[c])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", type=int, default=60_000)
    ap.add_argument("--folder", type=Path)
    args = ap.parse_args()
    from studio.training.dataset_read import read_summary
    from studio.training.tasks import import_trainer

    import_trainer()       # torch's import is the dialog's once per session, not the folder's
    with tempfile.TemporaryDirectory() as tmp:
        root = args.folder or Path(tmp) / "folder"
        if not root.exists():
            make_folder(root, args.images)
        for _ in range(2):          # interleaved rounds: the second with a warm directory cache
            t0 = time.perf_counter()
            n = sum(1 for d in os.scandir(root) for _ in os.scandir(d.path))
            walk = time.perf_counter() - t0
            t0 = time.perf_counter()
            s = read_summary(str(root), "auto", "", [], {"data": {"dataset": str(root)}}, (3, 32, 32))
            view = time.perf_counter() - t0
            print(f"{n} files: directory walk {walk:.3f} s, dataset view {view:.3f} s "
                  f"({view / walk:.1f}x the walk), {s['disk']['read']} files decoded")


if __name__ == "__main__":
    main()
