"""Batches for the loop, with fixed shapes so nothing recompiles.

* :class:`DeviceLoader`: the split lives on the device; a batch is one index gather and the
  augmentation is a few batched tensor ops. No per-sample Python, no host/device copies.
* :class:`StreamLoader`: for data over the device budget; a ``DataLoader`` with workers gathers
  raw batches on the host (pinned when the device is CUDA), the device normalises and augments.

Both expose the same two calls the loop needs: ``order()`` (the epoch's shuffled indices, drawn
from the loader's generator so a checkpoint can replay it) and ``batches(order, start)``; ``start()``
starts a loader's worker processes at the run's start (:class:`WorkerStart`), not at its first batch.
Training drops the ragged last batch; evaluation pads it and reports how many rows are real.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

import torch
from torch.utils.data import DataLoader, Dataset

from . import Split, normalise
from .forkserver import WORKER_PRELOAD, worker_context  # noqa: F401 - public here too


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

    in_order: torch.Tensor | None = None   # evaluation's order (the split's own): batches are views of it

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
        if not train:
            self.in_order = torch.arange(self.n, device=device)

    def start(self) -> None:
        """Start what this loader runs beside the loop: nothing for a split held on the device."""

    @property
    def steps(self) -> int:
        """Batches per pass: training drops the ragged last batch, evaluation keeps it (padded)."""
        return self.n // self.batch_size if self.train else -(-self.n // self.batch_size)

    def order(self) -> torch.Tensor:
        if self.train:
            return torch.randperm(self.n, device=self.device, generator=self.generator)
        return self.in_order if self.in_order is not None else torch.arange(self.n, device=self.device)

    def batches(self, order: torch.Tensor, start: int = 0) -> Iterator[tuple[torch.Tensor, torch.Tensor, int]]:
        """(x, y, valid rows) from step ``start`` on; eval's last batch repeats its final index as padding."""
        b = self.batch_size
        for i in range(start, self.steps):
            lo, valid = i * b, min(b, self.n - i * b)
            if order is self.in_order and valid == b:
                # the split in its own order: a batch is a view of it (a LeNet-5 val pass: 25.8 against 27.4 ms)
                yield self._finish(self.x[lo:lo + b]), self.y[lo:lo + b], valid
                continue
            idx = order[lo:lo + b]
            if valid < b:
                idx = torch.cat([idx, idx[-1:].expand(b - valid)])
            yield self._finish(self.x[idx]), self.y[idx], valid

    def _finish(self, x: torch.Tensor) -> torch.Tensor:
        if self.augment is not None:
            x = self.augment(x, self.generator)
        return batch_layout(x, self.channels_last)


def batch_layout(x: torch.Tensor, channels_last: bool) -> torch.Tensor:
    """A batch in the one layout every batch of a run has: contiguous (channels_last for a convnet's
    images) with the standard strides, also on dimensions of size 1, which ``contiguous`` leaves as they
    came (a 1-channel image batch is contiguous both ways with strides (64, 64, 8, 1) or (64, 1, 8, 1),
    depending on whether it was gathered or augmented). A compiled model's graphs are specialised and
    cached on the strides of its input: the warm-up's synthetic batches, laid out one way, missed the
    compile caches for a run of the digits laid out the other way. No copy when only strides of size-1
    dimensions differ."""
    fmt = torch.channels_last if channels_last and x.dim() == 4 else torch.contiguous_format
    x = x.contiguous(memory_format=fmt)
    standard = _standard_strides(tuple(x.shape), fmt is torch.channels_last)
    return x if x.stride() == standard else x.as_strided(x.shape, standard)


def _standard_strides(shape: tuple[int, ...], channels_last: bool) -> tuple[int, ...]:
    order = [0, 2, 3, 1] if channels_last else list(range(len(shape)))   # dimensions, outermost first
    strides, step = [0] * len(shape), 1
    for dim in reversed(order):
        strides[dim] = step
        step *= max(shape[dim], 1)
    return tuple(strides)


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


class WorkerStart:
    """A DataLoader's persistent workers started on a thread, so that their start (the forkserver's
    imports, a fork each, the dataset sent to each) overlaps the run's own setup (the optimizer, the
    compile, its first steps' warm-up) instead of being waited for at the first batch: the first epoch
    of a 640-JPEG run waited 15% of its time on data, later ones 0.1-0.4% (``benchmarks/data_wait.py``).

    The loader is not touched again until :meth:`wait` (its sampler, its iterator): the thread made the
    iterator, the first epoch resumes it. Started off the main thread, the iterator leaves out torch's
    SIGCHLD handler (set from the main thread only): a worker that dies is then found by the iterator's
    own check of its workers, within 5 s, instead of at once."""

    def __init__(self, loader: DataLoader, device: torch.device) -> None:
        self.error: BaseException | None = None
        # The thread pins batches (CUDA) on the device this thread has: a rank's own, not GPU 0
        cuda = torch.cuda.current_device() if device.type == "cuda" else None
        self.thread = threading.Thread(target=self._start, args=(loader, cuda), name="loader-start", daemon=True)
        self.thread.start()

    def _start(self, loader: DataLoader, cuda: int | None) -> None:
        try:
            if cuda is not None:
                torch.cuda.set_device(cuda)
            iter(loader)    # persistent workers: the loader keeps this iterator; each epoch resumes it
        except BaseException as exc:  # noqa: BLE001 - raised where the batches are asked for
            self.error = exc

    def wait(self) -> None:
        """Block until the workers are started; raises what starting them raised."""
        self.thread.join()
        if self.error is not None:
            raise self.error


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
        self.starting: WorkerStart | None = None

    def start(self) -> None:
        """Start the workers now, on a thread (:class:`WorkerStart`); the first batch waits for them."""
        if self.workers > 0 and self.n > 0 and self.starting is None:
            self.starting = WorkerStart(self.loader, self.device)

    def order(self) -> torch.Tensor:
        return super().order().cpu()

    def batches(self, order: torch.Tensor, start: int = 0) -> Iterator[tuple[torch.Tensor, torch.Tensor, int]]:
        if self.starting is not None:
            self.starting.wait()
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
