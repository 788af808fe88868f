"""Images per second of the worker's image loader against torchvision's ``ImageFolder`` + ``DataLoader``.

The same JPEG files (written once to a temp folder: ``--images`` of ``--side`` x ``--side`` pixels in 10
class folders), the same worker processes (``--workers``), batch and transforms (RandomResizedCrop to
``--crop``, horizontal flip, then normalised floats). Ours: :class:`trainer.data.images.loader.FileLoader`
as a run builds it (torchvision.io decode, uint8 batches from the workers, floats made and normalised by
the consumer); torchvision's: ``ImageFolder`` (Pillow decode) with the usual v2 pipeline ending in
``ToDtype(float32, scale=True)`` and ``Normalize`` in the workers. Each epoch after a warm-up one (the
workers started); rounds interleaved; the median of each printed with the ratio. Goal: >= 1.0. No
assertions. With ``--device cuda`` (or ``--device-decode`` on the CPU) a third loader: the workers read the
files' bytes and this process decodes them (:class:`~trainer.data.images.device_decode.DeviceDecode`,
nvJPEG on CUDA). ``--watchdog S`` prints every thread's stack each S seconds, so a run that stalls says where.
"""

from __future__ import annotations

import argparse
import faulthandler
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from torchvision import datasets  # noqa: E402
from torchvision.transforms import v2  # noqa: E402

from trainer.data.images.device_decode import DeviceDecode  # noqa: E402
from trainer.data.images.files import FileSplit  # noqa: E402
from trainer.data.images.index import index_folder  # noqa: E402
from trainer.data.images.loader import FileLoader  # noqa: E402
from trainer.data.images.transforms import eval_transform, train_transform  # noqa: E402
from trainer.spec import ImageSpec  # noqa: E402

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
DECODED_HERE = "ours, decoded in this process"


def write_images(root: Path, count: int, side: int) -> None:
    rng = np.random.default_rng(0)
    for c in range(10):
        (root / f"class{c}").mkdir(parents=True)
    for i in range(count):
        # smooth content (a gradient and noise), so the JPEGs compress like photographs, not like noise
        ramp = np.linspace(0, 200, side, dtype=np.float32)
        img = ramp[None, :, None] * rng.random(3, dtype=np.float32) + rng.integers(0, 40, (side, side, 3))
        Image.fromarray(img.clip(0, 255).astype(np.uint8)).save(root / f"class{i % 10}" / f"{i:06d}.jpg", quality=90)


def ours(root: Path, crop: int, batch: int, workers: int, device: str = "cpu", gpu_decode: bool = False) -> FileLoader:
    index = index_folder(root)
    im = ImageSpec(crop_scale=[0.35, 1.0])
    split = FileSplit(str(root), index.files, torch.from_numpy(index.labels), 3, (crop, crop),
                      eval_transform(im, (crop, crop)), np.arange(len(index)))
    transform, dev = train_transform(im, (crop, crop)), torch.device(device)
    on_device = DeviceDecode(transform, 3, (crop, crop), dev) if gpu_decode else None
    return FileLoader(split, batch, dev, train=True, mean=torch.tensor(MEAN) * 255, std=torch.tensor(STD) * 255,
                      transform=transform, workers=workers, device_decode=on_device)


def theirs(root: Path, crop: int, batch: int, workers: int) -> torch.utils.data.DataLoader:
    pipeline = v2.Compose([v2.ToImage(), v2.RandomResizedCrop(crop, scale=(0.35, 1.0), antialias=True),
                           v2.RandomHorizontalFlip(), v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD)])
    data = datasets.ImageFolder(str(root), transform=pipeline)
    return torch.utils.data.DataLoader(data, batch_size=batch, shuffle=True, num_workers=workers, drop_last=True,
                                       persistent_workers=workers > 0, multiprocessing_context="forkserver")


def _synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def epoch_ours(loader: FileLoader) -> float:
    t0, n = time.perf_counter(), 0
    for x, _, _ in loader.batches(loader.order()):
        n += len(x)
    _synchronize(str(loader.device))
    return n / (time.perf_counter() - t0)


def epoch_theirs(loader: torch.utils.data.DataLoader, device: str = "cpu") -> float:
    t0, n = time.perf_counter(), 0
    for x, _ in loader:
        x = x.to(device, non_blocking=True)     # on a GPU both sides end with the batch on the device
        n += len(x)
    _synchronize(device)
    return n / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--images", type=int, default=4000)
    ap.add_argument("--side", type=int, default=160)
    ap.add_argument("--crop", type=int, default=112)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--device", default="cpu", help="cpu, or cuda: batches end on the GPU, and ours also "
                    "decodes the JPEGs there (nvJPEG) as a run with gpu_decode does")
    ap.add_argument("--device-decode", action="store_true", help="on the CPU too: ours with the workers reading "
                    "bytes and this process decoding them (the GPU path's code, with the CPU's decoder)")
    ap.add_argument("--watchdog", type=float, default=0.0, help="every S seconds, print every thread's stack "
                    "(faulthandler): where a stuck run is stuck")
    args = ap.parse_args()
    if args.watchdog > 0:
        faulthandler.dump_traceback_later(args.watchdog, repeat=True)
    torch.set_num_threads(1)
    cuda = args.device.startswith("cuda")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "images"
        write_images(root, args.images, args.side)
        loaders = {"ours": ours(root, args.crop, args.batch, args.workers, args.device)}
        if cuda or args.device_decode:
            loaders[DECODED_HERE] = ours(root, args.crop, args.batch, args.workers, args.device, gpu_decode=True)
        theirs_loader = theirs(root, args.crop, args.batch, args.workers)
        for name, loader in loaders.items():    # warm-up: workers started, files in the page cache
            print(f"warm-up: {name} {epoch_ours(loader):.0f} images/s", flush=True)
        print(f"warm-up: torchvision {epoch_theirs(theirs_loader, args.device):.0f} images/s", flush=True)
        rates: dict[str, list[float]] = {name: [] for name in [*loaders, "torchvision"]}
        for _ in range(args.rounds):       # interleaved: a busy machine slows both alike
            for name, loader in loaders.items():
                rates[name].append(epoch_ours(loader))
            rates["torchvision"].append(epoch_theirs(theirs_loader, args.device))
    median = {name: statistics.median(r) for name, r in rates.items()}
    print(f"{args.images} JPEGs of {args.side}x{args.side}, RandomResizedCrop {args.crop}, batch {args.batch}, "
          f"{args.workers} workers, on {args.device}, median of {args.rounds} epochs")
    print(f"  ours (torchvision.io decode, uint8 batches)      {median['ours']:9.0f} images/s")
    if DECODED_HERE in median:
        label = f"ours, decoded in this process ({'nvJPEG' if cuda else 'CPU'})"
        print(f"  {label:48s} {median[DECODED_HERE]:9.0f} images/s")
    print(f"  torchvision ImageFolder + DataLoader (Pillow)     {median['torchvision']:9.0f} images/s")
    for name in loaders:
        print(f"  ratio {name} / torchvision: {median[name] / median['torchvision']:.2f}")


if __name__ == "__main__":
    main()
