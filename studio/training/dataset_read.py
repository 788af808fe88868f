"""What the Train dialog's dataset view is given: a summary read off the GUI thread.

An image folder or image CSV that the run will read from disk (``trainer.data.images.prepare.disk_path``)
is indexed, not loaded: the class histogram comes from the index and only the samples shown are
decoded (:func:`trainer.data.images.preview.preview_images`), so a folder of 60,000 images opens at
once. Any other dataset (the digits, NPZ, CSV tables, IDX, CIFAR batches) is read as the worker reads it
into memory. Both give the same keys; the functions run on a BackgroundTask (torch imported there).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

PER_CLASS = 4       # samples shown per class
MAX_CLASSES = 16    # classes whose samples are shown (all are counted)


def memory_summary(x: np.ndarray, y: np.ndarray, classes: Sequence[str]) -> dict[str, Any]:
    """A dataset read whole: its class counts, shape, and the first samples of each shown class."""
    counts = np.bincount(y, minlength=len(classes)) if len(y) else np.zeros(len(classes), int)
    samples: dict[str, list[tuple[str, np.ndarray]]] = {}
    for c in range(min(len(classes), MAX_CLASSES)):
        hit = np.flatnonzero(y == c)[:PER_CLASS]
        samples[str(classes[c])] = [(f"sample {int(i)}", np.asarray(x[i])) for i in hit]
    shape = tuple(int(d) for d in x.shape[1:])
    if x.ndim == 3:  # (N, H, W) images are one channel
        shape = (1, *shape)
    return {"samples": samples, "counts": {str(c): int(n) for c, n in zip(classes, counts, strict=False)},
            "shape": shape, "size": int(len(y)), "bad": [], "problems": [], "disk": None}


def read_summary(dataset: str, fmt: str, target: str, image_size: list[int], spec: dict[str, Any],
                 input_shape: tuple[int, ...]) -> dict[str, Any]:
    """The dataset view's summary of the spec's dataset, for a graph whose input is ``input_shape``.

    ``raw``: what the trainer's ``check_fit`` looks at (classes and one sample's shape);
    ``own_splits``: sizes of the val/test splits the dataset defines itself; ``disk``: for images read
    from disk, what the augmentation preview and the full check need (root, channels, size), else None."""
    # torch (under trainer.data and trainer.checks) is imported here, on the background thread.
    from .tasks import import_trainer

    import_trainer()       # trainer.checks among them: problem_list() finds it imported
    from trainer.checks import IndexShape, dataset_path
    from trainer.data import RawData, fit_to_input, load_raw
    from trainer.data.images.prepare import disk_path
    from trainer.spec import DataSpec, spec_from_dict

    try:
        rs = spec_from_dict(spec)
        d = rs.data
    except ValueError:   # the spec's own problems are listed by the dialog; the dataset is still read
        d = DataSpec(dataset=dataset, format=fmt, target=target, image_size=image_size)
        rs = None
    path = dataset_path(rs) if rs is not None else (None if dataset == "digits" else Path(dataset).expanduser())
    if path is not None and disk_path(d, path, input_shape, []):
        return _disk_summary(path, d, input_shape, IndexShape)
    raw = load_raw(dataset, fmt, target=target, image_size=image_size or None)
    summary = memory_summary(raw.x, raw.y, raw.classes)
    fitted = fit_to_input(RawData(raw.x[:1], raw.y[:1], list(raw.classes)), input_shape)
    summary["raw"] = fitted                                  # what the trainer's checks look at
    summary["own_splits"] = {name: len(y) for name, (_, y) in raw.own_splits().items()}  # IDX, CIFAR, split folders
    return summary


def _disk_summary(path: Path, d: Any, input_shape: tuple[int, ...], index_shape: Any) -> dict[str, Any]:
    from trainer.data.images.preview import preview_images

    im = d.images
    channels = int(input_shape[0])
    size = (int(im.size[0]), int(im.size[1])) if im.size else (int(input_shape[1]), int(input_shape[2]))
    view = preview_images(path, channels, size, im, per_class=PER_CLASS, max_classes=MAX_CLASSES)
    shape = (channels, *size)
    own = {k: n for k, n in view.splits.items() if k != "train"}
    return {"samples": view.samples, "counts": view.counts, "shape": shape, "size": view.size, "bad": view.bad,
            "problems": view.problems, "raw": index_shape(list(view.classes), shape), "own_splits": own,
            "disk": {"root": view.root, "channels": channels, "size": size, "read": view.read}}
