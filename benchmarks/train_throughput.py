"""Training throughput: the worker's own loop against two plain PyTorch loops, same run, same machine.

    python benchmarks/train_throughput.py [--epochs N] [--rounds R] [--batch-size B] [--compile]

* ``studio``: the trainer's loop as the worker runs it (``trainer.job`` + ``trainer.loop``), with its
  metrics written to a real SQLite run store and its events to a stream, on ``digits_cnn`` and the
  embedded digits.
* ``(a) hand-written``: a careful engineer's loop: data held as tensors, batches by index gather,
  ``zero_grad(set_to_none=True)``, foreach AdamW, OneCycleLR, loss summed on the device and read once
  per epoch.
* ``(b) examples/mnist``: the loop of pytorch/examples' ``mnist/main.py``: a Dataset with a per-sample
  transform (to float, normalise), a shuffling ``DataLoader``, ``loss.item()`` every ``log_interval``
  batches (written here in that style; nothing is fetched).

Every method trains the same model from the same weights on the same data with the same batch size.
``--compile`` compiles the model in studio and (a) alike (mode "default"); (b) stays eager.
Methods run interleaved for ``--rounds`` rounds and the best round of each counts (the machine may
be shared). Goals on a CPU: studio >= 0.97x of (a) and >= 2x of (b).

With CUDA, a second section runs ``resnet18_cifar`` on synthetic 3x32x32 data through the worker's
loop: eager fp32 against torch.compile + bf16 + channels_last, and reports the compile time.
"""

from __future__ import annotations

import argparse
import copy
import io
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from torch.utils.data import DataLoader, Dataset

from graph_editor.build import build_module
from trainer import events as ev
from trainer.checks import setup
from trainer.controls import Controls
from trainer.data import DIGITS
from trainer.job import make_job, report_metrics
from trainer.loop import EpochTotals, LoopHooks, train_one_epoch
from trainer.spec import spec_from_dict
from trainer.store import RunStore

ROOT = Path(__file__).resolve().parents[1]

TEMPLATES = ROOT / "assets" / "templates"


# --------------------------------------------------------------------- studio
def studio_job(spec_dict: dict, folder: Path):
    st = setup(spec_from_dict(spec_dict))
    torch.manual_seed(0)
    model = build_module(st.graph, device=st.device)
    store = RunStore(f"sqlite:///{folder / 'bench.sqlite'}")
    run_id = store.create_run(name="bench", spec={}, graph={}, graph_hash="", device=str(st.device), params=0)
    emitter = ev.Emitter(io.StringIO())
    emitter.run_id = run_id
    job = make_job(st, model, store=store, emitter=emitter, run_id=run_id, run_dir=folder / "run",
                   controls=Controls(lambda *_: None))
    return job


def studio_epochs(job, epochs: int) -> int:
    """The worker's epoch loop without evaluation: what a training epoch costs inside the worker."""
    hooks = LoopHooks(lr_at=job.lr_at, report=lambda *a: report_metrics(job, *a), poll=job.controls.poll,
                      interval_s=job.spec.train.metrics_interval_s)
    train, samples = job.loaders["train"], 0
    for e in range(epochs):
        step, _ = train_one_epoch(job.step_fn, job.opt, train.batches(train.order()), epoch=e + 1, step=job.step,
                                  batch_size=train.batch_size, window=job.window, totals=EpochTotals(), hooks=hooks)
        samples += (step - job.step) * train.batch_size
        job.step = step
    return samples


# ------------------------------------------------------------- (a) hand-written
def handwritten(model, x: torch.Tensor, y: torch.Tensor, batch: int, epochs: int, lr: float) -> int:
    # The same optimizer configuration as the worker's: no weight decay on biases and norm scales.
    decay = [p for p in model.parameters() if p.ndim >= 2]
    rest = [p for p in model.parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 5e-4}, {"params": rest, "weight_decay": 0.0}],
                            lr=lr, foreach=True)
    steps = len(y) // batch
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, lr, total_steps=steps * epochs)
    model.train()
    for _ in range(epochs):
        perm = torch.randperm(len(y), device=x.device)
        loss_sum = torch.zeros((), device=x.device)
        for i in range(steps):
            idx = perm[i * batch:(i + 1) * batch]
            loss = F.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            loss_sum += loss.detach()
        float(loss_sum)     # one sync per epoch
    return steps * batch * epochs


# ------------------------------------------------------------ (b) examples/mnist
class MnistStyleDataset(Dataset):
    """What torchvision's ``MNIST`` + ``ToTensor()`` + ``Normalize()`` do for each sample, written out
    (torchvision is not a dependency): uint8 tensor -> PIL image -> float tensor / 255 -> normalise."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor, mean: float, std: float, flatten: bool) -> None:
        self.data, self.targets = images, labels       # (N, H, W) uint8, as torchvision keeps MNIST
        self.mean, self.std, self.flatten = mean / 255.0, std / 255.0, flatten

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, index: int):
        img, target = self.data[index], int(self.targets[index])
        img = Image.fromarray(img.numpy(), mode="L")                       # MNIST.__getitem__
        pic = torch.from_numpy(np.array(img, np.uint8, copy=True))          # ToTensor
        t = pic.view(img.size[1], img.size[0], 1).permute((2, 0, 1)).contiguous().float().div(255)
        t = (t - self.mean) / self.std                                      # Normalize
        return (t.flatten() if self.flatten else t), target


def examples_mnist(model, dataset: Dataset, device: torch.device, batch: int, epochs: int, lr: float) -> int:
    kwargs = {"batch_size": batch, "shuffle": True, "drop_last": True}
    if device.type == "cuda":
        kwargs |= {"num_workers": 1, "pin_memory": True}
    loader = DataLoader(dataset, **kwargs)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=5e-4)  # as the example: one group
    model.train()
    seen = 0
    for _ in range(epochs):
        for batch_idx, (data, target) in enumerate(loader):
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            output = model(data)
            loss = F.cross_entropy(output, target)
            loss.backward()
            optimizer.step()
            if batch_idx % 10 == 0:
                _ = loss.item()   # the example prints the loss every log_interval batches
            seen += len(target)
    return seen


# ------------------------------------------------------------------- running
def timed(fn) -> float:
    t0 = time.perf_counter()
    n = fn()
    return n / (time.perf_counter() - t0)


def cpu_section(args: argparse.Namespace, template: str, data: dict, label: str, epochs: int) -> None:
    device = torch.device("cpu")
    mode = "default" if args.compile else "off"
    graph_path = TEMPLATES / f"{template}.graph.json"
    spec = {"model": {"graph": str(graph_path)}, "device": "cpu", "data": data,
            "train": {"epochs": epochs, "batch_size": args.batch_size}, "precision": {"compile": mode}}
    with tempfile.TemporaryDirectory() as tmp:
        job = studio_job(spec, Path(tmp))
        s = job.setup.splits
        x, y = s.train.x.to(device), s.train.y.to(device)
        # The raw 8x8 images of the same train split (pixel values 0..16), one global mean/std.
        raw = (s.train.x * s.std.view((1, -1) + (1,) * (x.dim() - 2)) + s.mean.view((1, -1) + (1,) * (x.dim() - 2)))
        images = raw.round().to(torch.uint8).reshape(len(raw), 8, 8)
        dataset = MnistStyleDataset(images, s.train.y, float(raw.mean()), float(raw.std()), flatten=x.dim() == 2)
        init = copy.deepcopy(job.model.state_dict())
        lr = job.spec.optim.lr

        def fresh():
            m = build_module(job.setup.graph, device=device)
            m.load_state_dict(init)
            return m

        # (a) gets the same compile mode as the worker (its model compiled once, reused every round);
        # (b) stays eager, as the example is written.
        model_a = torch.compile(fresh()) if args.compile else fresh()
        methods = {
            "studio (worker loop)": lambda: studio_epochs(job, epochs),
            "(a) hand-written": lambda: handwritten(model_a, x, y, args.batch_size, epochs, lr),
            "(b) examples/mnist": lambda: examples_mnist(fresh(), dataset, device, args.batch_size, epochs, lr),
        }
        for fn in methods.values():   # warm-up: allocator, thread pools, first-call paths
            fn()
        best = {name: 0.0 for name in methods}
        for _ in range(args.rounds):
            for name, fn in methods.items():
                best[name] = max(best[name], timed(fn))
        job.store.close()
    print(f"CPU, {template} on {label}, batch {args.batch_size}, {epochs} epoch(s) x {args.rounds} rounds, "
          f"{torch.get_num_threads()} threads, compile {mode} for studio and (a) (best round of each)")
    for name, sps in best.items():
        print(f"  {name:<22} {sps:>10,.0f} samples/s")
    ours = best["studio (worker loop)"]
    print(f"  ratio studio / (a) = {ours / best['(a) hand-written']:.3f}   (goal >= 0.97)")
    print(f"  ratio studio / (b) = {ours / best['(b) examples/mnist']:.2f}    (goal >= 2)")


def flat_digits(folder: Path) -> Path:
    """The embedded digits as 64 features per sample, for the MLP template."""
    with np.load(DIGITS) as z:
        images, labels = z["images"], z["labels"]
    path = folder / "digits_flat.npz"
    np.savez(path, x=images.reshape(len(images), 64), y=labels)
    return path


def gpu_section(args: argparse.Namespace) -> None:
    """resnet18_cifar on synthetic data: eager fp32 against compile + bf16 (+ channels_last)."""
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "synthetic.npz"
        np.savez(data, x=rng.integers(0, 255, (20000, 3, 32, 32), dtype=np.uint8), y=rng.integers(0, 10, 20000))
        results = {}
        for label, precision in (("eager fp32", {"dtype": "fp32", "compile": "off"}),
                                 ("compile + bf16", {"dtype": "bf16", "compile": "default", "channels_last": True})):
            spec = {"model": {"graph": str(TEMPLATES / "resnet18_cifar.graph.json")}, "device": "cuda",
                    "data": {"dataset": str(data), "test_fraction": 0.0, "val_fraction": 0.1},
                    "train": {"epochs": 3, "batch_size": 512}, "precision": precision}
            job = studio_job(spec, Path(tmp) / label.replace(" ", "_"))
            out = job.emitter.stream
            t0 = time.perf_counter()
            studio_epochs(job, 1)             # warm-up epoch (includes compiling)
            torch.cuda.synchronize()
            first = time.perf_counter() - t0
            sps = timed(lambda job=job: (studio_epochs(job, 2), torch.cuda.synchronize())[0])
            compile_s = [json.loads(line)["seconds"] for line in out.getvalue().splitlines()
                         if '"compile_done"' in line]
            results[label] = (sps, first, compile_s[0] if compile_s else None)
            job.store.close()
    print(f"GPU ({torch.cuda.get_device_name()}), resnet18_cifar, synthetic 3x32x32, batch 512")
    for label, (sps, first, comp) in results.items():
        extra = f", first step (compile) {comp:.1f} s" if comp is not None else ""
        print(f"  {label:<16} {sps:>10,.0f} samples/s  (first epoch {first:.1f} s{extra})")
    print(f"  speed-up compile + bf16 / eager fp32 = {results['compile + bf16'][0] / results['eager fp32'][0]:.2f}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--compile", action="store_true", help="compile the model in studio and (a) (CPU section)")
    args = parser.parse_args()
    # Compute-bound: a convnet, where the loop's overheads are small next to the convolutions.
    cpu_section(args, "digits_cnn", {"dataset": "digits"}, "the embedded digits (1x8x8)", args.epochs)
    # Loop-bound: a small MLP, where per-sample Python and host work decide the speed.
    with tempfile.TemporaryDirectory() as tmp:
        cpu_section(args, "mlp", {"dataset": str(flat_digits(Path(tmp)))}, "the embedded digits as 64 features",
                    args.epochs * 5)
    if torch.cuda.is_available():
        gpu_section(args)
    else:
        print("GPU section skipped: CUDA is not available")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
