"""Checks that need more than the spec: the device, the graph and the data, all before training.

``setup(spec)`` resolves the device, loads the graph and the dataset, and checks that they agree
(class count, input shape, augmentation on images only, batch size against the train split).
Every problem it finds is raised at once as a :class:`~trainer.spec.SpecError` naming the field.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch

from graph_editor.model import Graph, GraphError, InputSpec, fmt_shape, graph_from_dict, graph_to_dict
from graph_editor.model import load_graph as _load_graph_file
from graph_editor.model import validate as validate_graph
from graph_editor.model.units import MiB

from .data import DataError, RawData, Splits, fit_to_input, load_raw, prepare, split_indices
from .data.images.index import index_images
from .data.images.prepare import disk_path, disk_splits
from .spec import RunSpec, SpecError

CHANNELS_LAST_LAYERS = {"Conv2d", "ConvTranspose2d"}   # the layers that decide a graph is a convnet


def nhwc_pays(graph: Graph) -> bool:
    """Whether ``graph`` gains from channels_last: it takes images (C, H, W) and has 2-D convolutions,
    which oneDNN on CPUs and cuDNN's tensor-core kernels run fastest in NHWC. An MLP on images, or a
    graph that reshapes a flat input into an image, would only pay for the layout change."""
    return len(graph.input_spec.shape) == 3 and any(n.type in CHANNELS_LAST_LAYERS for n in graph)


def channels_last(spec: RunSpec, graph: Graph) -> bool:
    """The one rule for whether a run's batches and weights go channels_last: the spec allows it
    (``precision.channels_last``) and :func:`nhwc_pays`. The worker, the memory prediction and its doctor,
    the training dialog and the sweeps all ask here, so a predicted peak is the peak of the run that trains."""
    return spec.precision.channels_last and nhwc_pays(graph)


@dataclass
class Setup:
    """What a run starts from: the checked spec, the graph (with the data's input shape), the data."""

    spec: RunSpec
    graph: Graph
    splits: Splits
    device: torch.device
    streamed: bool  # True when the data exceeds the device budget and streams through a DataLoader

    @property
    def channels_last(self) -> bool:
        """Whether batches and weights go channels_last (:func:`channels_last`)."""
        return channels_last(self.spec, self.graph)

    @property
    def graph_dict(self) -> dict[str, Any]:
        return graph_to_dict(self.graph)

    @property
    def graph_hash(self) -> str:
        return hashlib.sha256(json.dumps(self.graph_dict, sort_keys=True).encode()).hexdigest()


def resolve_device(name: str, problems: list[str]) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(name)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            problems.append(f"device: '{name}' asked for, but CUDA is not available on this machine")
            return torch.device("cpu")
        index = dev.index or 0
        if index >= torch.cuda.device_count():
            problems.append(f"device: '{name}' does not exist ({torch.cuda.device_count()} CUDA device(s))")
        return torch.device("cuda", index)
    return dev


def check_precision(spec: RunSpec, device: torch.device, problems: list[str]) -> None:
    p = spec.precision.dtype
    if p == "fp16" and device.type != "cuda":
        problems.append("precision.dtype: fp16 with a grad scaler needs a CUDA device; use bf16 or fp32 on the cpu")
    if p == "fp8":
        if importlib.util.find_spec("torchao") is None:
            problems.append("precision.dtype: fp8 needs the 'torchao' package (pip install 'torch-studio[fp8]')")
        elif device.type != "cuda" or torch.cuda.get_device_capability(device) < (8, 9):
            problems.append("precision.dtype: fp8 needs a CUDA GPU of compute capability 8.9 or newer "
                            "(Ada, Hopper); use bf16")
    if spec.precision.compile == "max-autotune" and device.type != "cuda":
        problems.append("precision.compile: max-autotune tunes GPU kernels; use 'default' on the cpu")


def load_graph(spec: RunSpec, problems: list[str]) -> Graph | None:
    """The spec's graph: embedded, or a file relative to the spec's folder (then the current folder)."""
    g = spec.model.graph
    try:
        if isinstance(g, dict):
            return graph_from_dict(g)
        path = spec.resolve(g)
        if not path.exists() and Path(g).exists():
            path = Path(g)
        if not path.exists():
            problems.append(f"model.graph: file not found: {g}")
            return None
        return _load_graph_file(path)
    except GraphError as exc:
        problems.append(f"model.graph: {exc}")
    return None


class DataShape(Protocol):
    """What :func:`check_fit` needs of a dataset: its classes and one sample's shape."""

    @property
    def classes(self) -> list[str]: ...

    @property
    def sample_shape(self) -> tuple[int, ...]: ...


@dataclass
class IndexShape:
    classes: list[str]
    sample_shape: tuple[int, ...]


def dataset_path(spec: RunSpec) -> Path | None:
    """The spec's dataset as a path (relative to the spec's folder); None for the embedded digits."""
    d = spec.data
    if d.dataset == "digits" or d.format == "digits":
        return None
    path = Path(d.dataset).expanduser()
    return path if path.is_absolute() or not spec.base_dir else Path(spec.base_dir) / path


def load_data(spec: RunSpec, problems: list[str]) -> RawData | None:
    d = spec.data
    try:
        return load_raw(d.dataset, d.format, Path(spec.base_dir) if spec.base_dir else None, target=d.target,
                        image_size=d.image_size or None)
    except DataError as exc:
        problems.append(f"data.dataset: {exc}")
    except OSError as exc:
        problems.append(f"data.dataset: cannot read '{d.dataset}': {exc}")
    return None


def check_fit(spec: RunSpec, graph: Graph, raw: DataShape, problems: list[str]) -> None:
    """Classes and input shape of the data against the graph; the graph takes the data's shape if valid."""
    n_classes = len(raw.classes)
    if graph.num_classes != n_classes:
        problems.append(f"model.graph: the graph has {graph.num_classes} classes (num_classes) but "
                        f"data.dataset '{spec.data.dataset}' has {n_classes}")
    shape = raw.sample_shape
    if tuple(graph.input_spec.shape) != shape:
        trial = graph.copy()
        trial.input_spec = InputSpec(shape, graph.input_spec.dtype)
        inf = validate_graph(trial)
        if inf.ok:
            graph.input_spec = trial.input_spec
        else:
            first = "; ".join(str(p) for p in inf.problems if p.severity == "error")
            problems.append(f"data.dataset: samples of shape {fmt_shape(shape, batch=True)} do not fit the graph's input "
                            f"{fmt_shape(graph.input_spec.shape, batch=True)}: {first}")
    elif not (inf := validate_graph(graph)).ok:
        problems.append("model.graph: " + "; ".join(str(p) for p in inf.problems if p.severity == "error"))
    aug = spec.data.augment
    if (aug.flip or aug.translate) and len(shape) != 3:
        problems.append(f"data.augment: flip and translate need images (C x H x W); samples here are "
                        f"{fmt_shape(shape, batch=True)}")


def batch_problem(batch: int, train_size: int) -> str | None:
    """The refusal of a batch larger than the train split (the worker's and the Train dialog's), or None."""
    if batch > train_size:
        return f"train.batch_size: {batch} is larger than the train split ({train_size} samples)"
    return None


def train_split_size(spec: RunSpec, size: int, own_splits: Collection[str] = ()) -> int:
    """How many of ``size`` samples the run's train split gets (its fractions and seed); a split the
    dataset defines itself ("val", "test" in ``own_splits``) takes none of them, as in :func:`split_rows`."""
    val = 0.0 if "val" in own_splits else spec.data.val_fraction
    test = 0.0 if "test" in own_splits else spec.data.test_fraction
    return len(split_indices(size, val, test, spec.train.seed)[0])


def check_splits(spec: RunSpec, splits: Splits, problems: list[str]) -> None:
    if (line := batch_problem(spec.train.batch_size, len(splits.train))) is not None:
        problems.append(line)
    if len(splits.val) == 0 and (spec.checkpoints.best or spec.early_stopping.patience):
        problems.append("data.val_fraction: the val split is empty, but best checkpoints and early stopping "
                        "need one (set checkpoints.best false and early_stopping.patience 0)")


def setup(spec: RunSpec) -> Setup:
    """Everything a run needs, checked; raises SpecError listing every problem found."""
    problems: list[str] = []
    device = resolve_device(spec.device, problems)
    check_precision(spec, device, problems)
    graph = load_graph(spec, problems)
    path = dataset_path(spec)
    if graph is not None and path is not None and disk_path(spec.data, path, graph.input_spec.shape, problems):
        return setup_from_disk(spec, graph, path, device, problems)
    raw = load_data(spec, problems)
    if graph is not None and raw is not None:
        raw = fit_to_input(raw, graph.input_spec.shape)   # images flattened for a flat (MLP) input
        check_fit(spec, graph, raw, problems)
    if problems or graph is None or raw is None:
        raise SpecError(problems)
    float_bytes = 4 * (raw.x.size + sum(x.size for x, _ in raw.own_splits().values()))
    streamed = float_bytes > spec.data.device_budget_mb * MiB
    d = spec.data
    try:
        splits = prepare(raw, val_fraction=d.val_fraction, test_fraction=d.test_fraction, seed=spec.train.seed,
                         normalize=d.augment.normalize, keep_raw=streamed)
    except DataError as exc:
        raise SpecError([f"data.dataset: {exc}"]) from None
    check_splits(spec, splits, problems)
    if problems:
        raise SpecError(problems)
    return Setup(spec, graph, splits, device, streamed)


def setup_from_disk(spec: RunSpec, graph: Graph, path: Path, device: torch.device, problems: list[str]) -> Setup:
    """An image folder or CSV that stays on disk: indexed, checked (empty classes, one class, the same file
    in two splits), split; every batch is decoded later, in the loaders' worker processes."""
    try:
        index = index_images(path)
    except DataError as exc:
        raise SpecError([*problems, f"data.dataset: {exc}"]) from None
    except OSError as exc:
        raise SpecError([*problems, f"data.dataset: cannot read '{spec.data.dataset}': {exc}"]) from None
    im, (c, h, w) = spec.data.images, graph.input_spec.shape
    shape = (c, int(im.size[0]), int(im.size[1])) if im.size else (c, h, w)
    check_fit(spec, graph, IndexShape(list(index.classes), shape), problems)
    splits = disk_splits(spec, index, shape, problems)
    if splits is not None:
        check_splits(spec, splits, problems)
    if problems or splits is None:
        raise SpecError(problems)
    return Setup(spec, graph, splits, device, streamed=True)
