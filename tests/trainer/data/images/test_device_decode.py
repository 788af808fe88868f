"""The CUDA path of the streamed folder loader (``gpu_decode``), run here with a CPU stand-in for the GPU.

The same code runs as on a GPU: workers started from the forkserver only read bytes (asserted in the
worker: no CUDA there, and it runs in a DataLoader worker, not this process), the batch's files reach the
training process packed in one tensor, and the injected decode receives exactly the files' bytes there.
On a GPU (``cuda`` marker, ``make gpu-check``) the same loader decodes with nvJPEG while this process
holds a CUDA context and the workers still have none.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from trainer.data.images.decode import decode_jpegs
from trainer.data.images.device_decode import DeviceDecode, pack, unpack
from trainer.data.images.files import FileSplit
from trainer.data.images.index import index_folder
from trainer.data.images.loader import FileLoader, file_bytes
from trainer.data.images.transforms import eval_transform
from trainer.spec import ImageSpec

from ...image_files import corrupt, write_folder

pytestmark = pytest.mark.process

SIZE = (10, 12)


class WorkerProbe:
    """What a worker runs on each file (pickled to it): checks where it runs, leaves its pid in ``seen``."""

    def __init__(self, seen: Path) -> None:
        self.seen = seen

    def __call__(self, path: str) -> bytes:
        assert torch.utils.data.get_worker_info() is not None, "bytes read outside a DataLoader worker"
        assert not torch.cuda.is_initialized(), "a DataLoader worker initialised CUDA"
        (self.seen / str(os.getpid())).touch()
        return file_bytes(path)


def folder(tmp_path: Path) -> tuple[FileSplit, Path]:
    root = tmp_path / "d"
    write_folder(root, classes=2, per_class=5, size=(14, 16))
    Image.fromarray(np.full((9, 11, 3), 200, np.uint8)).save(root / "c0" / "z.png")   # not a JPEG: CPU path
    bad = corrupt(root / "c1" / "00002.jpg")
    index = index_folder(root)
    split = FileSplit(str(root), index.files, torch.from_numpy(index.labels), 3, SIZE,
                      eval_transform(ImageSpec(), SIZE), np.arange(len(index)))
    return split, bad


def loader(split: FileSplit, device: torch.device, device_decode: DeviceDecode | None) -> FileLoader:
    return FileLoader(split, 4, device, train=False, mean=torch.zeros(3), std=torch.ones(3),
                      transform=split.eval_transform, workers=2, device_decode=device_decode)


def epoch(files: FileLoader) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    batches = list(files.batches(files.order()))
    return (torch.cat([x for x, _, _ in batches]).cpu(), torch.cat([y for _, y, _ in batches]).cpu(),
            [valid for _, _, valid in batches])


def test_pack_round_trips_a_batch_with_an_unreadable_file():
    files = [b"\xff\xd8\xffabc", b"", b"0123456789"]
    flat, lengths = pack(files)
    assert flat.dtype == torch.uint8 and lengths.tolist() == [6, 0, 10]
    assert [bytes(t.numpy()) for t in unpack(flat, lengths)] == files
    assert all(t.is_contiguous() and t.dim() == 1 for t in unpack(flat, lengths))


def test_workers_read_bytes_and_the_training_process_decodes_them(tmp_path):
    split, bad = folder(tmp_path)
    received: list[list[bytes]] = []

    def stand_in(encoded: list[torch.Tensor], channels: int, device: torch.device) -> list[torch.Tensor | str]:
        assert torch.utils.data.get_worker_info() is None       # in the training process
        received.append([bytes(e.numpy()) for e in encoded])
        return decode_jpegs(encoded, channels, device)

    cpu = torch.device("cpu")
    on_device = loader(split, cpu, DeviceDecode(split.eval_transform, 3, SIZE, cpu, decode=stand_in))
    (tmp_path / "seen").mkdir()
    on_device.loader.dataset.read = WorkerProbe(tmp_path / "seen")   # before the workers start
    heard: list = []
    on_device.on_skip = heard.append
    x, y, valid = epoch(on_device)

    assert on_device.loader.multiprocessing_context.get_start_method() == "forkserver"
    pids = {int(p.name) for p in (tmp_path / "seen").iterdir()}
    assert pids and os.getpid() not in pids          # the files were read in the workers
    order = on_device.order()
    rows = [on_device.rows(order, i)[0] for i in range(on_device.steps)]   # the last batch padded
    assert received == [[Path(split.path(i)).read_bytes() for i in batch] for batch in rows]
    assert [[p for p, _ in new] for new in heard] == [[str(bad)]]

    in_workers = loader(split, cpu, None)          # the CPU path: decoded and transformed in the workers
    x0, y0, valid0 = epoch(in_workers)
    assert torch.equal(x, x0) and torch.equal(y, y0) and valid == valid0 == [4, 4, 2]   # 11 files, the corrupt one the 9th


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_the_workers_have_no_cuda_and_nvjpeg_decodes(tmp_path):
    split, _ = folder(tmp_path)
    gpu = torch.device("cuda")
    on_device = loader(split, gpu, DeviceDecode(split.eval_transform, 3, SIZE, gpu))
    (tmp_path / "seen").mkdir()
    on_device.loader.dataset.read = WorkerProbe(tmp_path / "seen")
    x, y, valid = epoch(on_device)
    assert torch.cuda.is_initialized() and any((tmp_path / "seen").iterdir())
    x0, y0, valid0 = epoch(loader(split, torch.device("cpu"), None))
    assert torch.equal(y, y0) and valid == valid0
    # nvJPEG's IDCT is not libjpeg-turbo's: a few levels apart at most, on average under one
    assert (x - x0).abs().mean() < 1.5 and (x - x0).abs().max() <= 40
