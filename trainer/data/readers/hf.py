"""Hugging Face datasets saved with ``save_to_disk`` (needs the optional ``datasets`` package)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..arrays import labels, samples
from ..formats import DataError, RawData, ReadOptions, dataset_format


def _is_hf(path: Path) -> bool:
    return path.is_dir() and ((path / "dataset_info.json").exists() or (path / "dataset_dict.json").exists())


@dataset_format("hf", detect=_is_hf)
def read_hf(path: Path, options: ReadOptions) -> RawData:
    """A dataset saved with ``save_to_disk``: an image column (``image``/``img``) or numeric columns."""
    try:
        import datasets
    except ImportError:
        raise DataError(f"{path}: reading a Hugging Face dataset needs the 'datasets' package "
                        "(pip install 'torch-studio[hf]')") from None
    ds = datasets.load_from_disk(str(path))
    if isinstance(ds, datasets.DatasetDict):
        train, test = ds.get("train", next(iter(ds.values()))), ds.get("test")
    else:
        train, test = ds, None
    label = options.target or next((c for c in ("label", "labels", "target") if c in train.column_names), "")
    if label not in train.column_names:
        raise DataError(f"{path}: no label column '{label or 'label'}' (columns: {', '.join(train.column_names)})")
    feature = train.features[label]
    names = list(getattr(feature, "names", None) or [])
    x, y = _hf_arrays(train, label, path)
    y, classes = labels(y, names, path)
    if test is not None:
        xt, yt = _hf_arrays(test, label, path)
        return RawData(x, y, classes, xt, labels(yt, classes, path)[0])
    return RawData(x, y, classes)


def _hf_arrays(ds: object, label: str, path: Path) -> tuple[np.ndarray, np.ndarray]:
    cols = [c for c in ds.column_names if c != label]  # type: ignore[attr-defined]
    image_col = next((c for c in ("image", "img", "pixel_values") if c in cols), None)
    y = np.asarray(ds[label], dtype=np.int64)  # type: ignore[index]
    if image_col:
        x = np.stack([np.asarray(im) for im in ds[image_col]])  # type: ignore[index]
        return samples(x.astype(np.uint8) if x.dtype.kind in "iu" else x, path), y
    table = np.stack([np.asarray(ds[c], dtype=np.float32) for c in cols], axis=1)  # type: ignore[index]
    return table, y
