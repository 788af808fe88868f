"""The run's splits of an image index: which files train, validate and test, at what size and channels.

:func:`disk_path` says whether a run reads its dataset from disk; :func:`disk_splits` turns an index into the run's :class:`~trainer.data.Splits` of files: split by the
seed as data in memory are (the source's own ``val/`` and ``test/`` folders kept), at the size and
channels the graph takes, normalised with ``data.images.mean``/``std``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ...spec import DataSpec, RunSpec
from ..formats import detect_format
from ..loaders import Augment
from ..raw import DataError
from ..splits import Splits, split_indices
from .device_decode import DeviceDecode
from .files import FileSplit
from .index import SPLIT_CODES, ImageIndex
from .loader import FileLoader
from .report import duplicate_problem, duplicates_across, index_problems
from .transforms import batch_mix, eval_transform, train_transform

IMAGE_FORMATS = ("image_folder", "image_csv")


def disk_path(d: DataSpec, path: Path, input_shape: tuple[int, ...], problems: list[str]) -> bool:
    """Whether this dataset is read from disk: ``data.images.source`` auto or disk, the path an image
    folder or an image CSV, and a graph that takes images (C x H x W, C 1 or 3). ``disk`` when it cannot be
    is a problem; ``auto`` then reads the data into memory as before."""
    source = d.images.source
    if source == "memory" or d.dataset == "digits" or d.format == "digits" or not path.exists():
        return False
    try:
        fmt = detect_format(path) if d.format == "auto" else d.format
    except DataError:
        fmt = ""
    why = ""
    if fmt not in IMAGE_FORMATS:
        why = f"it is {fmt or 'not an image dataset'}, not an image folder or an image CSV"
    elif len(input_shape) != 3 or input_shape[0] not in (1, 3):
        why = f"the graph's input {list(input_shape)} is not images of 1 or 3 channels (C x H x W)"
    if why and source == "disk":
        problems.append(f"data.images.source: disk reads image folders and CSVs into image graphs, but {why}")
    return not why


def disk_splits(spec: RunSpec, index: ImageIndex, input_shape: tuple[int, ...], problems: list[str]) -> Splits | None:
    """The run's splits of files, or None with the problems found (empty classes, one class, duplicates)."""
    d, im = spec.data, spec.data.images
    problems += index_problems(index, "data.dataset")
    channels = int(input_shape[0])
    size = (int(im.size[0]), int(im.size[1])) if im.size else (int(input_shape[1]), int(input_shape[2]))
    n = len(index)
    own = index.own_splits()
    rest = np.arange(n) if index.split_of is None else np.flatnonzero(index.split_of == SPLIT_CODES["train"])
    tr, va, te = (rest[rows] for rows in split_indices(len(rest), 0.0 if "val" in own else d.val_fraction,
                                                       0.0 if "test" in own else d.test_fraction, spec.train.seed))
    if index.split_of is not None:
        va = np.flatnonzero(index.split_of == SPLIT_CODES["val"]) if "val" in own else va
        te = np.flatnonzero(index.split_of == SPLIT_CODES["test"]) if "test" in own else te
    split_of = np.zeros(n, dtype=np.int8)
    split_of[va], split_of[te] = 1, 2
    if im.duplicates == "refuse" and len(va) + len(te):
        dups = duplicates_across(index, split_of)
        if dups:
            problems.append(duplicate_problem(dups, "data.dataset"))
    if len(tr) == 0:
        problems.append("data.dataset: the train split is empty: the dataset is too small for these fractions")
    if problems:
        return None
    evaluate = eval_transform(im, size)
    own_start = {1: va[0] if "val" in own and len(va) else 0, 2: te[0] if "test" in own and len(te) else 0}
    parts = [FileSplit(index.root, index.files[rows], torch.from_numpy(index.labels[rows]), channels, size, evaluate,
                       rows - own_start.get(code, 0))   # a split folder's rows count from its first file
             for code, rows in enumerate((tr, va, te))]
    mean, std = _stats(im.mean, im.std, channels, d.augment.normalize)
    return Splits(parts[0], parts[1], parts[2], classes=list(index.classes), mean=mean, std=std, image_shape=(channels, *size))


def _stats(mean: list[float], std: list[float], channels: int, normalize: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel statistics on the 0..255 scale of the uint8 batches (as data in memory has them)."""
    if not normalize:
        return torch.zeros(channels), torch.ones(channels)
    m, s = torch.tensor(mean, dtype=torch.float32), torch.tensor(std, dtype=torch.float32)
    if len(m) != channels:     # ImageNet's three for a grey graph: their mean; one value for RGB: repeated
        m, s = (m.mean().repeat(channels), s.mean().repeat(channels))
    return m * 255.0, s * 255.0


def file_loaders(spec: RunSpec, splits: Splits, device: torch.device, *, channels_last: bool, rank: int = 0,
                 world: int = 1) -> dict[str, FileLoader]:
    """The train, val and test loaders of a split of files: train augmented (``data.images``), the others
    resized and centre-cropped; ``rank``/``world`` under torchrun."""
    im, shape = spec.data.images, splits.image_shape
    assert shape is not None
    aug = Augment(spec.data.augment.flip, spec.data.augment.translate)
    out: dict[str, FileLoader] = {}
    for name in ("train", "val", "test"):
        split, train = getattr(splits, name), name == "train"
        assert isinstance(split, FileSplit)
        transform = train_transform(im, shape[1:]) if train else split.eval_transform
        # On CUDA the workers read bytes and the training process decodes them on the GPU (nvJPEG)
        on_device = DeviceDecode(transform, split.channels, split.size, device) \
            if im.gpu_decode and device.type == "cuda" else None
        out[name] = FileLoader(split, spec.train.batch_size, device, train=train, mean=splits.mean, std=splits.std,
                               transform=transform, workers=spec.data.workers, mix=batch_mix(im, len(splits.classes)),
                               augment=aug, seed=spec.train.seed, channels_last=channels_last,
                               device_decode=on_device, rank=rank, world=world)
    return out
