"""CIFAR-10 and CIFAR-100 python batches, read without running any code from them."""

from __future__ import annotations

import io
import pickle
from pathlib import Path

import numpy as np

from ..formats import DataError, RawData, ReadOptions, dataset_format


class _ArraysOnly(pickle.Unpickler):
    """Admits NumPy's array reconstruction and nothing else: a CIFAR batch cannot run code.

    (``_codecs.encode`` is how protocol-2 pickles written by Python 3 carry bytes; it only encodes text.)
    """

    _ALLOWED = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
                ("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode")}

    def find_class(self, module: str, name: str) -> object:
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(f"refusing to load '{module}.{name}' from a data file")
        return super().find_class(module, name)


def _unpickle(path: Path) -> dict:
    try:
        obj = _ArraysOnly(io.BytesIO(path.read_bytes()), encoding="bytes").load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError) as exc:
        raise DataError(f"{path}: not a CIFAR python batch ({exc})") from None
    if not isinstance(obj, dict):
        raise DataError(f"{path}: not a CIFAR python batch (no dictionary inside)")
    return {k.decode() if isinstance(k, bytes) else k: v for k, v in obj.items()}


def _is_cifar(path: Path) -> bool:
    names = {p.name for p in path.iterdir()} if path.is_dir() else set()
    return {"data_batch_1", "test_batch"} <= names or {"train", "test", "meta"} <= names


@dataset_format("cifar", detect=_is_cifar)
def read_cifar(path: Path, options: ReadOptions) -> RawData:
    """CIFAR-10 (``data_batch_1..5``, ``test_batch``) or CIFAR-100 (``train``, ``test``) python batches."""
    if (path / "data_batch_1").exists():
        train = [_unpickle(p) for p in sorted(path.glob("data_batch_*"))]
        test, meta, key, names = _unpickle(path / "test_batch"), path / "batches.meta", "labels", "label_names"
    else:
        train, test = [_unpickle(path / "train")], _unpickle(path / "test")
        meta, key, names = path / "meta", "fine_labels", "fine_label_names"

    def arrays(batches: list[dict]) -> tuple[np.ndarray, np.ndarray]:
        try:
            x = np.concatenate([np.asarray(b["data"], dtype=np.uint8) for b in batches])
            y = np.concatenate([np.asarray(b[key], dtype=np.int64) for b in batches])
        except KeyError as exc:
            raise DataError(f"{path}: a batch has no '{exc.args[0]}' entry") from None
        return x.reshape(-1, 3, 32, 32), y

    x, y = arrays(train)
    xt, yt = arrays([test])
    count = int(max(y.max(), yt.max())) + 1
    classes = [str(i) for i in range(count)]
    if meta.exists():
        listed = _unpickle(meta).get(names, [])
        if len(listed) == count:
            classes = [n.decode() if isinstance(n, bytes) else str(n) for n in listed]
    return RawData(x, y, classes, xt, yt)
