"""A CSV of ``path,label`` rows naming image files (the common Kaggle form), read whole into memory.

Runs read it from disk instead (:mod:`trainer.data.images`) unless ``data.images.source`` is
``memory``; this reader is that choice, and what previews and a run's predictions read.
"""

from __future__ import annotations

from pathlib import Path

from ..formats import RawData, ReadOptions, dataset_format
from ..images.index import index_csv, is_image_csv
from ..images.whole import load_images


@dataset_format("image_csv", detect=is_image_csv)
def read_image_csv(path: Path, options: ReadOptions) -> RawData:
    """A CSV of image paths (relative to its folder) and class labels, every image at ``image_size``."""
    index = index_csv(path)
    files = [("", int(label), Path(index.path(i))) for i, label in enumerate(index.labels.tolist())]
    x, y = load_images(files, options.image_size)
    return RawData(x, y, index.classes)
