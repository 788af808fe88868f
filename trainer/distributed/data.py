"""Each rank's share of the data: its slice of every global batch.

Every rank draws the same epoch order from the same seeded generator, and rank ``r`` of ``W`` takes
rows ``r*b .. (r+1)*b`` of each global batch of ``W*b`` rows. The ranks together train on exactly
the batches one process would, which is what makes 2 processes agree with 1 (the proof test).

* Data held on the device (it fits ``data.device_budget_mb``): every rank keeps the split and
  gathers only its rows; with augmentation it augments the global batch and keeps its slice, so the
  random flips and shifts are the ones one process draws. No communication.
* Data that streams: each rank's DataLoader workers read only its rows (a deterministic split of
  each batch, as ``DistributedSampler`` splits an epoch); augmentation draws from a per-rank
  generator (each rank's rows get their own draws).

Evaluation is split too: step ``i`` of a split's pass is the one-process batch ``i`` (``batch_size``
rows), of which rank ``r`` runs rows ``r*b .. (r+1)*b`` at the per-rank batch ``b`` (the shape it
trains at). Every rank takes the same number of steps (the sharded model's collectives run on all of
them); rows past the split's end are padding (the last row repeated) and masked by the ``valid``
count. :func:`trainer.loop.evaluate` then sums [loss sum, rows, confusion counts] over the ranks, so
rank 0 reports exactly the rows one process evaluates, each once.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from ..checks import Setup
from ..data.images.prepare import file_loaders
from ..data.loaders import Augment, DeviceLoader, StreamLoader, batch_layout, eval_rows


class ShardLoader(DeviceLoader):
    """A device-resident train split; batches are this rank's slice of each global batch."""

    def __init__(self, *args, rank: int, world: int, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.rank, self.local = rank, self.batch_size // world

    def batches(self, order: torch.Tensor, start: int = 0) -> Iterator[tuple[torch.Tensor, torch.Tensor, int]]:
        b, lo, hi = self.batch_size, self.rank * self.local, (self.rank + 1) * self.local
        for i in range(start, self.steps):
            idx = order[i * b:(i + 1) * b]
            if self.augment is not None:     # the global batch's draws, this rank's rows
                x = self._finish(self.x[idx])[lo:hi]
            else:
                x = self._finish(self.x[idx[lo:hi]])
            yield x, self.y[idx[lo:hi]], self.local


class ShardStreamLoader(StreamLoader):
    """A streamed train split; this rank's workers read only its slice of each global batch."""

    def __init__(self, *args, rank: int, world: int, seed: int = 0, **kwargs) -> None:
        super().__init__(*args, seed=seed, **kwargs)
        self.rank, self.local = rank, self.batch_size // world
        self.aug_generator = torch.Generator(device=self.device)
        self.aug_generator.manual_seed(seed * 1000003 + rank + 1)

    def batches(self, order: torch.Tensor, start: int = 0) -> Iterator[tuple[torch.Tensor, torch.Tensor, int]]:
        b, lo, hi = self.batch_size, self.rank * self.local, (self.rank + 1) * self.local
        self.sampler.batches = [order[i * b:(i + 1) * b][lo:hi].tolist() for i in range(start, self.steps)]
        for x, y in self.loader:
            x = _normalised(self, x.to(self.device, non_blocking=True))
            if self.augment is not None:
                x = self.augment(x, self.aug_generator)
            yield batch_layout(x, self.channels_last), y.to(self.device, non_blocking=True), self.local


class ShardEvalLoader(DeviceLoader):
    """A device-resident evaluation split; each step is this rank's share of one process's batch."""

    def __init__(self, *args, rank: int, world: int, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.rank, self.world = rank, world

    def batches(self, order: torch.Tensor, start: int = 0) -> Iterator[tuple[torch.Tensor, torch.Tensor, int]]:
        for i in range(start, self.steps):
            idx, valid = eval_rows(order, i, self.batch_size, self.rank, self.world)
            yield self._finish(self.x[idx]), self.y[idx], valid


class ShardEvalStreamLoader(StreamLoader):
    """A streamed evaluation split; this rank's workers read only its share of each step."""

    def __init__(self, *args, rank: int, world: int, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.rank, self.world = rank, world

    def batches(self, order: torch.Tensor, start: int = 0) -> Iterator[tuple[torch.Tensor, torch.Tensor, int]]:
        rows = [eval_rows(order, i, self.batch_size, self.rank, self.world) for i in range(start, self.steps)]
        self.sampler.batches = [idx.tolist() for idx, _ in rows]
        for (x, y), (_, valid) in zip(self.loader, rows, strict=True):
            x = _normalised(self, x.to(self.device, non_blocking=True))
            yield self._finish(x), y.to(self.device, non_blocking=True), valid


def _normalised(loader: StreamLoader, x: torch.Tensor) -> torch.Tensor:
    from ..data import normalise

    return normalise(x, loader.mean, loader.std)


def rank_loaders(setup: Setup, rank: int, world: int) -> dict[str, DeviceLoader]:
    """Train: this rank's slices of the global batch (``train.batch_size``); val and test: this rank's
    share of each evaluation step (the metrics are summed over the ranks)."""
    spec, s = setup.spec, setup.splits
    if s.on_disk:   # image files: each rank's workers decode only its rows
        return dict(file_loaders(spec, s, setup.device, channels_last=setup.channels_last, rank=rank, world=world))
    aug = Augment(spec.data.augment.flip, spec.data.augment.translate)
    kw = dict(channels_last=setup.channels_last, seed=spec.train.seed)
    b, dev = spec.train.batch_size, setup.device
    out: dict[str, DeviceLoader] = {}
    if setup.streamed:
        out["train"] = ShardStreamLoader(s.train, b, dev, train=True, mean=s.mean, std=s.std,
                                         workers=spec.data.workers, augment=aug, rank=rank, world=world, **kw)
    else:
        out["train"] = ShardLoader(s.train, b, dev, train=True, augment=aug, rank=rank, world=world, **kw)
    for name, split in (("val", s.val), ("test", s.test)):
        if setup.streamed:
            out[name] = ShardEvalStreamLoader(split, b, dev, train=False, mean=s.mean, std=s.std,
                                              workers=spec.data.workers, augment=aug, rank=rank, world=world, **kw)
        else:
            out[name] = ShardEvalLoader(split, b, dev, train=False, augment=aug, rank=rank, world=world, **kw)
    return out
