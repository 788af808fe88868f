"""Batches for the loop, with fixed shapes so nothing recompiles.

* :class:`DeviceLoader`: the split lives on the device; a batch is one index gather and the
  augmentation is a few batched tensor ops. No per-sample Python, no host/device copies.
* :class:`StreamLoader`: for data over the device budget; a ``DataLoader`` with workers gathers
  raw batches on the host (pinned when the device is CUDA), the device normalises and augments.

Both expose the same two calls the loop needs: ``order()`` (the epoch's shuffled indices, drawn
from the loader's generator so a checkpoint can replay it) and ``batches(order, start)``.
Training drops the ragged last batch; evaluation pads it and reports how many rows are real.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.forkserver
from collections.abc import Iterator, Sequence
from multiprocessing.context import BaseContext

import torch
from torch.utils.data import DataLoader, Dataset

from . import Split, normalise


class Augment:
    """Batched random flip and translate (zero padding + a random offset per sample)."""

    def __init__(self, flip: bool, translate: int) -> None:
        self.flip, self.translate = flip, translate

    @property
    def active(self) -> bool:
        return self.flip or self.translate > 0

    def __call__(self, x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        b = x.shape[0]
        if self.flip:
            mask = torch.rand(b, device=x.device, generator=gen) < 0.5
            x = torch.where(mask.view(b, 1, 1, 1), x.flip(-1), x)
        if self.translate > 0:
            x = _translate(x, self.translate, gen)
        return x


def _translate(x: torch.Tensor, pad: int, gen: torch.Generator) -> torch.Tensor:
    b, _, h, w = x.shape
    padded = torch.nn.functional.pad(x, (pad, pad, pad, pad))
    offsets = torch.randint(0, 2 * pad + 1, (b, 2), device=x.device, generator=gen)
    rows = (offsets[:, 0:1] + torch.arange(h, device=x.device)).view(b, h, 1)
    cols = (offsets[:, 1:2] + torch.arange(w, device=x.device)).view(b, 1, w)
    batch = torch.arange(b, device=x.device).view(b, 1, 1)
    # Advanced indexing puts the indexed dims first: (b, h, w, c) -> back to (b, c, h, w).
    return padded.permute(0, 2, 3, 1)[batch, rows, cols].permute(0, 3, 1, 2)


class DeviceLoader:
    """A split held on ``device``; batches are gathers of ``batch_size`` rows."""

    def __init__(self, split: Split, batch_size: int, device: torch.device, *, train: bool,
                 augment: Augment | None = None, seed: int = 0, channels_last: bool = False) -> None:
        self.x = split.x.to(device)
        if channels_last and self.x.dim() == 4:
            self.x = self.x.contiguous(memory_format=torch.channels_last)
        self.y = split.y.to(device)
        self.n, self.batch_size, self.train, self.device = len(split), batch_size, train, device
        self.augment = augment if augment and augment.active and train else None
        self.generator = torch.Generator(device=device)
        self.generator.manual_seed(seed)
        self.channels_last = channels_last

    @property
    def steps(self) -> int:
        """Batches per pass: training drops the ragged last batch, evaluation keeps it (padded)."""
        return self.n // self.batch_size if self.train else -(-self.n // self.batch_size)

    def order(self) -> torch.Tensor:
        if self.train:
            return torch.randperm(self.n, device=self.device, generator=self.generator)
        return torch.arange(self.n, device=self.device)

    def batches(self, order: torch.Tensor, start: int = 0) -> Iterator[tuple[torch.Tensor, torch.Tensor, int]]:
        """(x, y, valid rows) from step ``start`` on; eval's last batch repeats its final index as padding."""
        b = self.batch_size
        for i in range(start, self.steps):
            idx, valid = order[i * b:(i + 1) * b], min(b, self.n - i * b)
            if valid < b:
                idx = torch.cat([idx, idx[-1:].expand(b - valid)])
            yield self._finish(self.x[idx]), self.y[idx], valid

    def _finish(self, x: torch.Tensor) -> torch.Tensor:
        if self.augment is not None:
            x = self.augment(x, self.generator)
        if self.channels_last and x.dim() == 4:
            x = x.contiguous(memory_format=torch.channels_last)
        return x


class _Rows(Dataset):
    def __init__(self, split: Split) -> None:
        self.x, self.y = split.x, split.y

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, index: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        idx = torch.as_tensor(index)
        return self.x[idx], self.y[idx]


class _EpochBatches:
    """The sampler: this epoch's index batches, replaced each epoch (workers persist across epochs)."""

    def __init__(self) -> None:
        self.batches: Sequence[list[int]] = []

    def __iter__(self):
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)


# What the workers' forkserver imports once, so that each worker forks with it loaded (its pages shared)
# instead of importing torch itself: 2 workers for each of 3 splits each spent seconds importing it.
WORKER_PRELOAD = ["torch", "torchvision.transforms.v2", "trainer.data.images.loader"]


def worker_context() -> BaseContext | None:
    """How DataLoader workers start: from a forkserver, a clean process that is never a fork of this one
    (whose threads may hold locks, and whose CUDA does not survive a fork), with :data:`WORKER_PRELOAD`
    imported. Started at the first call without waiting for it, so its imports overlap the run's setup."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return None
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(WORKER_PRELOAD)
    multiprocessing.forkserver.ensure_running()
    return ctx


class StreamLoader(DeviceLoader):
    """A split kept on the host (raw, e.g. uint8); workers gather batches, the device normalises them.

    Workers start once, from a clean forkserver process (:func:`worker_context`; the worker has threads,
    a plain fork could copy a lock held by one of them), and persist across epochs.
    """

    def __init__(self, split: Split, batch_size: int, device: torch.device, *, train: bool,
                 mean: torch.Tensor, std: torch.Tensor, workers: int = 2, augment: Augment | None = None,
                 seed: int = 0, channels_last: bool = False) -> None:
        self.n, self.batch_size, self.train, self.device = len(split), batch_size, train, device
        self.augment = augment if augment and augment.active and train else None
        self.generator = torch.Generator(device=device)
        self.generator.manual_seed(seed)
        self.channels_last, self.workers = channels_last, workers
        self.mean, self.std = mean.to(device), std.to(device)
        self.sampler = _EpochBatches()
        # Each item of the sampler is a whole batch of indices: one gather per batch in a worker.
        self.loader = DataLoader(_Rows(split), sampler=self.sampler, batch_size=None, num_workers=workers,
                                 pin_memory=device.type == "cuda", persistent_workers=workers > 0,
                                 multiprocessing_context=worker_context() if workers > 0 else None)

    def order(self) -> torch.Tensor:
        return super().order().cpu()

    def batches(self, order: torch.Tensor, start: int = 0) -> Iterator[tuple[torch.Tensor, torch.Tensor, int]]:
        b = self.batch_size
        index_batches = []
        for i in range(start, self.steps):
            idx = order[i * b:(i + 1) * b].tolist()
            index_batches.append(idx + idx[-1:] * (b - len(idx)))
        self.sampler.batches = index_batches
        for i, (x, y) in enumerate(self.loader, start=start):
            x = normalise(x.to(self.device, non_blocking=True), self.mean, self.std)
            yield self._finish(x), y.to(self.device, non_blocking=True), min(b, self.n - i * b)


def eval_rows(order: torch.Tensor, step: int, batch: int, rank: int, world: int) -> tuple[torch.Tensor, int]:
    """Rank ``rank``'s rows of evaluation step ``step`` (``batch`` rows a step over all ranks), padded
    to ``batch / world`` with the split's last row, and how many are real."""
    local, n = batch // world, len(order)
    lo = min(step * batch + rank * local, n)
    idx = order[lo:min(lo + local, n)]
    valid = len(idx)
    if valid < local:
        idx = torch.cat([idx, order[-1:].expand(local - valid)])
    return idx, valid
