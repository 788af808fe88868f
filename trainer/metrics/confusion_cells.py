"""Which validation samples fall in each confusion-matrix cell: re-evaluate a checkpoint on the CPU.

The worker's ``epoch_end`` event carries the matrix, not per-sample predictions (that would be
thousands of numbers per epoch on the event stream). When the user clicks a cell, the studio calls
:func:`predict_validation` on a background thread: it rebuilds the run's validation split exactly
as the worker did (same reader, fractions and seed), loads the checkpoint's weights into the
graph's module on the CPU and predicts. For the small datasets a studio trains interactively (the
digits: 180 validation samples) this takes well under a second, and it never initialises CUDA.
Qt-free, so it is tested and usable without the studio.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from graph_editor.building.fx import build_module
from graph_editor.model import Graph, InputSpec
from graph_editor.model.serialize import graph_from_dict, load_graph

from ..checkpoints.single_file import load_checkpoint_weights
from ..checks import dataset_path
from ..data import DataError, fit_to_input, load_raw, normalise, prepare, split_rows
from ..data.images.decode import decode
from ..data.images.files import FileSplit
from ..data.images.index import index_images
from ..data.images.prepare import disk_path, disk_splits
from ..protocol.events import PerClass
from ..spec import RunSpec, spec_from_dict
from .per_class import per_class

BATCH = 512


@dataclass
class Predictions:
    """Validation samples (as read, for display), their dataset row numbers, true and predicted class."""

    images: np.ndarray
    rows: np.ndarray
    true: np.ndarray
    pred: np.ndarray
    classes: list[str]

    def matrix(self) -> np.ndarray:
        """Rows true class, columns predicted, as the worker's ``confusion``."""
        n = len(self.classes)
        m = np.zeros((n, n), dtype=np.int64)
        np.add.at(m, (self.true, self.pred), 1)
        return m

    def per_class(self) -> PerClass:
        """Precision, recall, F1 and support of every class, computed as the worker computes them."""
        return per_class(self.matrix())


def predict_validation(spec_dict: dict[str, Any], checkpoint: str | Path, base_dir: str | Path | None = None,
                       ) -> Predictions:
    """Predict the validation split of the run described by ``spec_dict`` with ``checkpoint``'s weights."""
    spec = spec_from_dict(spec_dict)
    base = Path(base_dir) if base_dir else None
    d = spec.data
    g = spec.model.graph
    graph = graph_from_dict(g) if isinstance(g, dict) else load_graph(spec.resolve(g) if base is None
                                                                     else base / g)
    if base is not None and not spec.base_dir:
        spec.base_dir = str(base)
    path = dataset_path(spec)
    if path is not None and disk_path(d, path, graph.input_spec.shape, []):
        return _predict_files(spec, graph, path, checkpoint)
    raw = load_raw(d.dataset, d.format, base, target=d.target, image_size=d.image_size or None)
    if raw.x_val is not None:                      # the dataset's own validation split
        shown, va = raw.x_val, np.arange(len(raw.x_val))
    else:
        _, va, _ = split_rows(raw, d.val_fraction, d.test_fraction, spec.train.seed)
        shown = raw.x[va]
    raw = fit_to_input(raw, graph.input_spec.shape)  # as the worker fed it (images flattened for an MLP)
    splits = prepare(raw, val_fraction=d.val_fraction, test_fraction=d.test_fraction, seed=spec.train.seed,
                     normalize=d.augment.normalize)
    pred = _predict(graph, checkpoint, splits.samples("val").float())
    return Predictions(shown, va, splits.val.y.numpy(), pred, list(splits.classes))


def _predict(graph: Graph, checkpoint: str | Path, x: torch.Tensor) -> np.ndarray:
    module = build_module(graph, device="cpu")
    module.load_state_dict(load_checkpoint_weights(checkpoint))
    module.eval()
    preds = []
    with torch.no_grad():
        for i in range(0, len(x), BATCH):
            preds.append(module(x[i:i + BATCH]).argmax(dim=1))
    return torch.cat(preds).numpy() if preds else np.zeros(0, dtype=np.int64)


def _predict_files(spec: RunSpec, graph: Graph, path: Path, checkpoint: str | Path) -> Predictions:
    """A run that read its images from disk: its validation files decoded and cropped as its loader did
    (a file it skipped is skipped here too)."""
    shape = (graph.input_spec.shape[0], *spec.data.images.size) if spec.data.images.size else graph.input_spec.shape
    graph.input_spec = InputSpec(tuple(int(v) for v in shape), graph.input_spec.dtype)
    problems: list[str] = []
    splits = disk_splits(spec, index_images(path), graph.input_spec.shape, problems)
    if splits is None or not isinstance(splits.val, FileSplit):
        raise DataError("; ".join(problems) or f"{path}: cannot be split as the run split it")
    val = splits.val
    kept, images = [], []
    for i in range(len(val)):
        image = decode(val.path(i), val.channels)
        if not isinstance(image, str):
            kept.append(i)
            images.append(val.eval_transform(image))
    shown = torch.stack(images) if images else torch.zeros(0, *graph.input_spec.shape, dtype=torch.uint8)
    pred = _predict(graph, checkpoint, normalise(shown, splits.mean, splits.std))
    rows = val.rows[kept]
    return Predictions(shown.numpy(), rows, val.y.numpy()[kept], pred, list(splits.classes))
