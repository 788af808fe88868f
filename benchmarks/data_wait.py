"""Does the training loop wait on an image folder's loader when decoding is cheaper than the step?

    python benchmarks/data_wait.py [--template resnet18_cifar] [--images 2000] [--side 40] [--workers 2]
                                   [--batch 64] [--epochs 3] [--device cpu]

A folder of ``--images`` JPEGs (``--side`` pixels, 10 classes) is trained by the real worker (``python -m
trainer run SPEC``, streamed from disk: decoded per batch in ``--workers`` DataLoader processes) with a
template heavier than its decode. Printed per epoch: the run's ``data/wait`` metric (the share of the
epoch's training time the loop spent inside the loader's ``next``), and the epoch's samples/s. Beside it,
in the same run, the loader alone (:class:`~trainer.data.images.loader.FileLoader` as the run builds it,
one epoch after a warm-up): its images/s over the run's samples/s is how much cheaper the decode is than
the step (above 1: the claim's condition holds). The first epoch also starts the loader's workers. No
assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.image_loader import write_images  # noqa: E402
from trainer.checks import setup  # noqa: E402
from trainer.job import make_loaders  # noqa: E402
from trainer.metrics import names  # noqa: E402
from trainer.spec import SCHEMA_VERSION, spec_from_dict  # noqa: E402
from trainer.store.runs import RunStore  # noqa: E402


def run_spec(args: argparse.Namespace, folder: Path) -> dict:
    graph = ROOT / "assets" / "templates" / f"{args.template}.graph.json"
    return {"schema_version": SCHEMA_VERSION, "name": "bench-data-wait", "device": args.device,
            "model": {"graph": str(graph)},
            "data": {"dataset": str(folder), "workers": args.workers, "val_fraction": 0.0, "test_fraction": 0.0},
            "train": {"epochs": args.epochs, "batch_size": args.batch},
            "checkpoints": {"best": False, "last": False}}


def loader_rate(spec: dict) -> float:
    """Images/s of the run's train loader alone, over one epoch after a warm-up one (its workers started)."""
    loader = make_loaders(setup(spec_from_dict(spec)))["train"]
    rates = []
    for _ in range(2):
        t0, n = time.perf_counter(), 0
        for x, _, _ in loader.batches(loader.order()):
            n += len(x)
        rates.append(n / (time.perf_counter() - t0))
    return rates[-1]


def train(spec_path: Path, db: str) -> tuple[int, list[float]]:
    """The run's id and each epoch's seconds (its ``epoch_end`` events)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "trainer", "run", str(spec_path), "--db", db], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=3600)
    seconds = []
    for line in done.stdout.splitlines():
        event = json.loads(line) if line.startswith("{") else {}
        if event.get("event") == "epoch_end":
            seconds.append(float(event["seconds"]))
        if event.get("event") == "finished":
            return int(event["run_id"]), seconds
    raise RuntimeError(f"the worker did not finish (exit {done.returncode}): {done.stderr[-2000:]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--template", default="resnet18_cifar")
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--side", type=int, default=40)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "images"
        write_images(folder, args.images, args.side)
        spec = run_spec(args, folder)
        spec_path = Path(tmp) / "spec.json"
        spec_path.write_text(json.dumps(spec))
        db = f"sqlite:///{tmp}/runs.db"
        run_id, seconds = train(spec_path, db)
        store = RunStore(db)
        waits = [v for _, _, v in store.metrics(run_id, names.DATA_WAIT.name)]
        rates = [v for _, _, v in store.metrics(run_id, names.SAMPLES_PER_S.name) if v]
        alone = loader_rate(spec)
    step_rate = statistics.median(rates)
    print(f"{args.template} on {args.images} JPEGs of {args.side}x{args.side}, batch {args.batch}, {args.workers} "
          f"loader workers, {args.device}, load average {os.getloadavg()[0]:.1f}")
    for epoch, (share, took) in enumerate(zip(waits, seconds, strict=False), start=1):
        print(f"  epoch {epoch}: data/wait {100 * share:5.1f}% of its training time ({share * took:.1f} s of "
              f"{took:.1f} s)")
    print(f"  training {step_rate:.0f} samples/s (median of the run's metrics windows); the loader alone "
          f"{alone:.0f} images/s: decode / step = {alone / step_rate:.1f}x")


if __name__ == "__main__":
    main()
