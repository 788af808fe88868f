"""The process that DataLoader workers start from: a forkserver that imported torch once.

Torch-free, so that the worker's entry point (``trainer/__main__.py``) can start it before it imports torch
itself: the two imports then run side by side instead of the first batch waiting for the forkserver's.
"""

from __future__ import annotations

import json
import multiprocessing
import multiprocessing.forkserver
from multiprocessing.context import BaseContext
from pathlib import Path

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


def start_early(argv: list[str]) -> bool:
    """Start the forkserver now when the worker command ``argv`` (``run SPEC ...``) trains on images read
    from disk by loader workers: a spec whose ``data.dataset`` is a folder of class folders or a CSV, with
    ``data.workers`` above 0 and ``data.images.source`` not ``memory``. False when it cannot tell (the run
    then starts it after its setup: :func:`trainer.job.start_loader_helper`)."""
    if len(argv) < 2 or argv[0] != "run":
        return False
    try:
        spec_file = Path(argv[1])
        data = json.loads(spec_file.read_text(encoding="utf-8")).get("data", {})
        path = Path(str(data.get("dataset", "digits"))).expanduser()
        reads_images = (int(data.get("workers", 2)) > 0 and data.get("images", {}).get("source") != "memory"
                        and data.get("format", "auto") in ("auto", "image_folder", "image_csv"))
    except (OSError, ValueError, TypeError, AttributeError):
        return False
    path = path if path.is_absolute() else spec_file.resolve().parent / path
    images = path.suffix.lower() == ".csv" if path.is_file() else path.is_dir() and any(
        p.is_dir() for p in path.iterdir())
    if reads_images and images:
        worker_context()
    return reads_images and images
