"""Batches decoded from files in DataLoader worker processes: the index goes to the workers, never the
pixels, so the training process's memory does not grow with the number of images.

Each worker takes a whole batch of indices, decodes and transforms each file (:mod:`.decode`,
:mod:`.transforms`) and returns one uint8 batch; the device makes floats of it, normalises it, and
mixes it (MixUp/CutMix) for training. A file that cannot be decoded is skipped and counted: its row
is filled with a repeat of the batch's last good image (the batch keeps its fixed shape, nothing
recompiles), an evaluation batch counts only its good rows, and ``on_skip`` hears of each file once.
With a :class:`~.device_decode.DeviceDecode` (CUDA with ``gpu_decode``), workers only read bytes and never
touch CUDA; the JPEGs of a batch are decoded together in the training process on the GPU (nvJPEG) and
transformed there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import overload

import torch
from torch.utils.data import DataLoader, Dataset

from ..loaders import Augment, DeviceLoader, WorkerStart, _EpochBatches, eval_rows, worker_context
from ..splits import normalise
from .decode import decode
from .device_decode import DeviceDecode, pack
from .files import FileSplit
from .transforms import Transform

Mix = Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]
Skipped = list[tuple[str, str]]     # (path, reason)


class _Files(Dataset[tuple[object, torch.Tensor, list[tuple[int, str, str]]]]):
    """Item = a list of indices; value = (uint8 batch of the good ones, their labels, bad (position, path, why)).

    Without a transform (decoded in the training process) the value's first part is the files' bytes,
    packed (:func:`~.device_decode.pack`), with every label: the decode there finds the bad ones."""

    def __init__(self, split: FileSplit, transform: Transform | None) -> None:
        self.split, self.transform = split, transform
        self.read = file_bytes     # what a worker runs on each file when it only reads

    def __len__(self) -> int:
        return len(self.split)

    def __getitem__(self, index: list[int]) -> tuple[object, torch.Tensor, list[tuple[int, str, str]]]:
        s, bad = self.split, []
        if self.transform is None:
            raw: list[bytes] = []
            for pos, i in enumerate(index):
                try:
                    raw.append(self.read(s.path(i)))
                except OSError as exc:
                    raw.append(b"")
                    bad.append((pos, s.path(i), f"cannot be read ({exc.strerror or exc})"))
            return pack(raw), s.y[index], bad
        images, labels = [], []
        for pos, i in enumerate(index):
            image = decode(s.path(i), s.channels)
            if isinstance(image, str):
                bad.append((pos, s.path(i), image))
                continue
            images.append(self.transform(image))
            labels.append(int(s.y[i]))
        if not images:
            return torch.zeros(0, s.channels, *s.size, dtype=torch.uint8), torch.zeros(0, dtype=torch.int64), bad
        return torch.stack(images), torch.tensor(labels, dtype=torch.int64), bad


def file_bytes(path: str) -> bytes:
    return Path(path).read_bytes()


class FileLoader(DeviceLoader):
    """A split of files; same two calls as the other loaders (``order()``, ``batches(order, start)``).

    Workers start once, from a clean forkserver process, and persist across epochs. ``rank``/``world``
    give a rank under torchrun its rows of each global batch (training) or its share of each
    evaluation step, as :mod:`trainer.distributed.data` does for data in memory."""

    def __init__(self, split: FileSplit, batch_size: int, device: torch.device, *, train: bool, mean: torch.Tensor,
                 std: torch.Tensor, transform: Transform, workers: int = 2, mix: Mix | None = None,
                 augment: Augment | None = None, seed: int = 0, channels_last: bool = False,
                 device_decode: DeviceDecode | None = None, rank: int = 0, world: int = 1) -> None:
        self.split, self.n, self.batch_size, self.train, self.device = split, len(split), batch_size, train, device
        self.augment = augment if augment and augment.active and train else None
        self.mix = mix if train else None
        self.generator = torch.Generator(device=device)
        self.generator.manual_seed(seed)
        self.channels_last, self.workers, self.rank, self.world = channels_last, workers, rank, world
        self.mean, self.std = mean.to(device), std.to(device)
        self.device_decode = device_decode
        self.skipped: dict[str, str] = {}
        self.on_skip: Callable[[Skipped], None] | None = None
        self.sampler = _EpochBatches()
        seeds = torch.Generator().manual_seed(seed * 7919 + rank * 2 + int(train))   # the workers' augmentation seeds
        # Workers start from a clean forkserver (worker_context), never forked from this process (CUDA does
        # not survive a fork). Pinned pages only for decoded batches, copied to the GPU: bytes decode on the host.
        self.loader = DataLoader(_Files(split, None if device_decode else transform), sampler=self.sampler,
                                 batch_size=None, num_workers=workers,
                                 pin_memory=device.type == "cuda" and device_decode is None,
                                 persistent_workers=workers > 0, generator=seeds,
                                 multiprocessing_context=worker_context() if workers > 0 else None)
        self.starting: WorkerStart | None = None

    def start(self) -> None:
        """Start the workers now, on a thread (:class:`~..loaders.WorkerStart`); the first batch waits for them."""
        if self.workers > 0 and self.n > 0 and self.starting is None:
            self.starting = WorkerStart(self.loader, self.device)

    def order(self) -> torch.Tensor:
        return super().order().cpu()

    def rows(self, order: torch.Tensor, i: int) -> tuple[list[int], int]:
        """The indices of step ``i`` (padded to the batch with the last one) and how many are real."""
        b = self.batch_size
        if self.world > 1:
            if self.train:
                local = b // self.world
                return order[i * b:(i + 1) * b][self.rank * local:(self.rank + 1) * local].tolist(), local
            rows, valid = eval_rows(order, i, b, self.rank, self.world)
            return rows.tolist(), valid
        idx = order[i * b:(i + 1) * b].tolist()
        return idx + idx[-1:] * (b - len(idx)), min(b, self.n - i * b)

    def batches(self, order: torch.Tensor, start: int = 0) -> Iterator[tuple[torch.Tensor, torch.Tensor, int]]:
        if self.starting is not None:
            self.starting.wait()    # the loader is the start thread's until then
        steps = range(start, self.steps)
        # Each step's indices made when the loader asks for them: a list of Python ints per image held
        # for the whole epoch grew the worker with the dataset (60,000 images: 600 lists of 100 ints).
        self.sampler.batches = _StepRows(self, order, steps)
        for (images, y, bad), i in zip(self.loader, steps, strict=True):
            idx, valid = self.rows(order, i)
            if self.device_decode is not None:
                images, y, bad = self.device_decode(images, y, bad, partial(_path_at, self.split, idx))
            if bad:
                self._note(bad)
                valid -= sum(1 for pos, _, _ in bad if pos < valid)
            if len(y) == 0:
                continue      # not one image of this batch decodes: nothing to learn or count
            x, y = _fill(images, y, len(idx))
            x = normalise(x.to(self.device, non_blocking=True), self.mean, self.std)
            y = y.to(self.device, non_blocking=True)
            if self.mix is not None:
                x, y = self.mix(x, y)
            yield self._finish(x), y, valid

    def _note(self, bad: list[tuple[int, str, str]]) -> None:
        new = []
        for _, path, why in bad:     # an evaluation batch's padding may repeat a skipped file
            if path not in self.skipped:
                self.skipped[path] = why
                new.append((path, why))
        if new and self.on_skip is not None:
            self.on_skip(new)


class _StepRows(Sequence[list[int]]):
    """An epoch's index batches for the sampler, one step's made at a time."""

    def __init__(self, loader: FileLoader, order: torch.Tensor, steps: range) -> None:
        self.loader, self.order, self.steps = loader, order, steps

    def __len__(self) -> int:
        return len(self.steps)

    @overload
    def __getitem__(self, i: int) -> list[int]: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[list[int]]: ...

    def __getitem__(self, i: int | slice) -> list[int] | Sequence[list[int]]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        return self.loader.rows(self.order, self.steps[i])[0]


def _path_at(split: FileSplit, idx: list[int], pos: int) -> str:
    return split.path(idx[pos])


def _fill(images: torch.Tensor, y: torch.Tensor, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The batch at its fixed ``rows``: the good images first, then repeats of the last (a skipped file's rows)."""
    missing = rows - len(y)
    if missing <= 0:
        return images, y
    return (torch.cat([images, images[-1:].expand(missing, *images.shape[1:])]),
            torch.cat([y, y[-1:].expand(missing)]))
