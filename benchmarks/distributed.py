"""Data-parallel training speed: the worker under torchrun against a plain PyTorch DDP loop, same run.

    python benchmarks/distributed.py [--steps N] [--batch-size B] [--rounds R]     # CPU, gloo: 1 and 2 ranks
    python benchmarks/distributed.py --gpu [--steps N] [--batch-size B]             # every GPU, nccl

* ``studio``: ``python -m trainer run SPEC`` on ``resnet18_cifar`` and synthetic 3x32x32 data (an
  .npz, held on the device), with ``distributed.strategy`` none (1 process) or ddp (N ranks through
  torchrun): the worker's whole loop, metrics all-reduced, rank 0 writing a real SQLite store.
  Steps/s is the train split's steps over the training seconds of the last epoch (``epoch_end``;
  the first epoch warms up).
* ``plain``: a hand-written loop, the same model built from the same graph, data held as tensors,
  each rank gathering its slice of the global batch, ``DistributedDataParallel``, the worker's
  optimizer (AdamW), channels_last as the worker's convnets, timed over the same number of steps after a warm-up epoch: started with
  torchrun's own command line for N ranks, as one process for 1.

Every method trains at the same global batch (per-rank batch = global / N). Ratios: studio/plain
for each number of processes (the cost of the worker's loop under torchrun) and N/1 for each
method (the scaling; on a CPU the ranks share the same cores, so the honest figure is near 1x or
below). Rounds alternate the order of the methods; each figure is the median over rounds. The
plain loop runs with the worker's CPU threading (the usable cores split among the ranks, passive
OpenMP waiting).
``--gpu`` runs 1 and all GPUs with nccl, bf16 and channels_last, and reports the scaling
efficiency (samples/s at N over N times samples/s at 1).
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
GRAPH = ROOT / "assets" / "templates" / "resnet18_cifar.graph.json"


def write_data(folder: Path, n: int) -> Path:
    import numpy as np

    rng = np.random.default_rng(0)
    path = folder / "cifar_like.npz"
    np.savez(path, x=rng.integers(0, 256, (n, 3, 32, 32), dtype=np.uint8), y=rng.integers(0, 10, n))
    return path


def studio(folder: Path, data: Path, args: argparse.Namespace, nproc: int, gpu: bool) -> float:
    """Steps/s of the worker's last epoch."""
    spec = {"name": f"bench-{nproc}", "model": {"graph": str(GRAPH)},
            "data": {"dataset": str(data), "val_fraction": 0.02, "test_fraction": 0.0},
            "train": {"epochs": 2, "batch_size": args.batch_size, "metrics_interval_s": 1.0},
            "checkpoints": {"best": False, "last": False}, "device": "cuda" if gpu else "cpu",
            "precision": {"dtype": "bf16" if gpu else "fp32"},
            "distributed": {"strategy": "ddp" if nproc > 1 else "none", "nproc_per_node": nproc}}
    path = folder / f"spec-{nproc}.json"
    path.write_text(json.dumps(spec))
    out = subprocess.run([sys.executable, "-m", "trainer", "run", str(path), "--db",
                          f"sqlite:///{folder / 'runs.sqlite'}"], capture_output=True, text=True, cwd=ROOT)
    events = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    ends = [e for e in events if e["event"] == "epoch_end"]
    started = next((e for e in events if e["event"] == "run_started"), None)
    if out.returncode != 0 or not ends or started is None:
        raise SystemExit(f"the worker failed ({out.returncode}): {out.stderr[-2000:]}")
    return started["steps_per_epoch"] / ends[-1]["seconds"]


def plain(folder: Path, data: Path, args: argparse.Namespace, nproc: int, gpu: bool) -> float:
    """Steps/s of the hand-written loop (torchrun's command line for several ranks)."""
    result = folder / f"plain-{nproc}.json"
    me = [str(Path(__file__).resolve()), "--reference", str(data), "--batch-size", str(args.batch_size),
          "--steps", str(args.steps), "--out", str(result)] + (["--gpu"] if gpu else [])
    cmd = [sys.executable, *me] if nproc == 1 else [
        sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}", *me]
    from trainer.threads import usable_cores

    # The worker's threading (trainer.threads; the launcher splits the cores among its ranks): the
    # usable cores, passive OpenMP waiting. PyTorch's defaults on a shared 2-core box take os.cpu_count()
    # spinning threads, which would make this reference slow for reasons that are not the loop's.
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    if not gpu:
        for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            env[variable] = str(max(1, usable_cores() // nproc))
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    if out.returncode != 0:
        raise SystemExit(f"the plain loop failed: {out.stderr[-2000:]}")
    return json.loads(result.read_text())["steps_per_s"]


def reference(args: argparse.Namespace) -> None:
    """The plain DDP loop, run as one rank (under torchrun) or alone."""
    import numpy as np
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    from graph_editor.building import build_module
    from graph_editor.model import load_graph

    ranks = "RANK" in os.environ
    rank, world = (int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])) if ranks else (0, 1)
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if args.gpu else torch.device("cpu")
    if ranks:
        dist.init_process_group("nccl" if args.gpu else "gloo")
    z = np.load(args.reference)
    x = torch.from_numpy(z["x"]).float().div(255).to(device)
    y = torch.from_numpy(z["y"]).long().to(device)
    torch.manual_seed(0)
    model = build_module(load_graph(GRAPH), device=device)
    model = model.to(memory_format=torch.channels_last)      # as the worker does for a convnet on images
    x = x.contiguous(memory_format=torch.channels_last)
    net = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if args.gpu else None) \
        if ranks else model
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    b, local = args.batch_size, args.batch_size // world
    gen = torch.Generator(device=device).manual_seed(0)

    def step(i: int) -> torch.Tensor:
        idx = torch.randint(0, len(y), (b,), device=device, generator=gen)[rank * local:(rank + 1) * local]
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.gpu):
            loss = F.cross_entropy(net(x[idx]), y[idx])
        loss.backward()
        opt.step()
        return loss.detach()

    for i in range(args.steps):          # warm-up: as the worker's first epoch
        step(i)
    if args.gpu:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(args.steps):
        last = step(i)
    last.item()                           # the one sync
    seconds = time.perf_counter() - t0
    if rank == 0:
        Path(args.out).write_text(json.dumps({"steps_per_s": args.steps / seconds}))
    if ranks:
        dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=6, help="timed steps per method (the worker's epoch)")
    parser.add_argument("--batch-size", type=int, default=32, help="the global batch")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--gpu", action="store_true", help="1 and all GPUs, nccl, bf16")
    parser.add_argument("--reference", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.reference:
        return reference(args)
    if args.gpu:
        import torch

        counts = [1, torch.cuda.device_count()]
        if counts[1] < 2:
            raise SystemExit("--gpu needs at least 2 GPUs")
        where = f"{counts[1]} x {torch.cuda.get_device_name()}"
    else:
        counts, where = [1, 2], f"CPU, {os.cpu_count()} cores (gloo)"
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        n = args.batch_size * args.steps
        data = write_data(folder, int(n / 0.98) + 1)       # the train split: `steps` global batches
        results: dict[tuple[str, int], list[float]] = {}
        for r in range(args.rounds):
            order = [(m, k) for k in counts for m in ("studio", "plain")]
            for method, k in order if r % 2 == 0 else order[::-1]:
                fn = studio if method == "studio" else plain
                results.setdefault((method, k), []).append(fn(folder, data, args, k, args.gpu))
    med = {key: statistics.median(v) for key, v in results.items()}
    print(f"resnet18_cifar, global batch {args.batch_size}, {args.steps} timed steps, {args.rounds} round(s), "
          f"on {where}")
    for k in counts:
        s, p = med[("studio", k)], med[("plain", k)]
        print(f"  {k} process{'es' if k > 1 else ''}: studio {s:.3f} steps/s, plain PyTorch {p:.3f} steps/s, "
              f"studio/plain {s / p:.2f}x")
    n1, n2 = counts
    for method in ("studio", "plain"):
        scale = med[(method, n2)] / med[(method, n1)]
        print(f"  {method}: {n2} processes / 1 = {scale:.2f}x steps/s (same global batch); "
              f"scaling efficiency {scale / n2 * 100:.0f}%")


if __name__ == "__main__":
    main()
