"""Training throughput: the worker's own loop against two plain PyTorch loops, same run, same machine.

    python benchmarks/train_throughput.py [--epochs N] [--rounds R] [--batch-size B] [--compile] [--gpu-only]

* ``studio``: the trainer's loop as the worker runs it (``trainer.job`` + ``trainer.loop``), with its
  metrics written to a real SQLite run store and its events to a stream, on ``digits_cnn`` and the
  embedded digits.
* ``(a) hand-written``: a careful engineer's loop: data held as tensors, batches by index gather,
  ``zero_grad(set_to_none=True)``, the same optimizer as the worker's (``make_optimizer`` of the spec:
  fused AdamW, no decay on biases and norm scales), OneCycleLR, loss summed on the device and read
  once per epoch. With the optimizer and memory format the same, studio / (a) is the cost of the
  worker's loop itself (metrics, controls, store, events).
* ``(b) examples/mnist``: the training loop of pytorch/examples' ``mnist/main.py`` on its CPU path:
  torchvision's ``MNIST`` dataset with ``Compose([ToTensor(), Normalize(...)])``, a ``DataLoader``
  with only ``batch_size`` set (the example adds workers, pinning and shuffling on CUDA alone), the
  default AdamW (the example's Adadelta swapped for the same update rule as the others), and a
  formatted ``loss.item()`` line every ``log_interval`` (10) batches. torchvision is not a
  dependency, so its per-sample work is written out step for step (:class:`MnistLike`).

Every method trains the same model from the same weights on the same data with the same batch size.
``--compile`` compiles the model in studio and (a) alike (mode "default"); (b) stays eager.
Methods run interleaved for ``--rounds`` rounds, each round from the same initial weights and every
other round in reverse order. A ratio is the median of the per-round ratios: on a shared machine the
speed drifts by more than the effects measured here, and the methods of one round run back to back.
Goals on a CPU: studio >= 0.97x of (a) and >= 2x of (b).

With CUDA, a second section runs ``resnet18_cifar`` on synthetic 3x32x32 data through the worker's
loop: eager fp32 against torch.compile + bf16 + channels_last, and reports the compile time.
"""

from __future__ import annotations

import argparse
import copy
import io
import json
import statistics
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
from trainer.job import build_model, make_job, report_metrics
from trainer.loop import EpochTotals, LoopHooks, train_one_epoch
from trainer.optim import make_optimizer
from trainer.spec import spec_from_dict
from trainer.store import RunStore

ROOT = Path(__file__).resolve().parents[1]

TEMPLATES = ROOT / "assets" / "templates"


# --------------------------------------------------------------------- studio
def studio_job(spec_dict: dict, folder: Path):
    st = setup(spec_from_dict(spec_dict))
    model = build_model(st)               # as the worker builds it: seed, memory format, fp8
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


def restart(job, init: dict[str, torch.Tensor]) -> None:
    """Put the job back at step 0 with the initial weights and a zeroed optimizer state, in place (the
    same tensors, so a compiled model and optimizer step are reused, not recompiled)."""
    with torch.no_grad():
        for name, value in job.model.state_dict().items():
            value.copy_(init[name])
        for state in job.opt.state.values():
            for value in state.values():
                if isinstance(value, torch.Tensor):
                    value.zero_()
    job.window.take()                   # what the last round left unreported
    job.step = 0


# ------------------------------------------------------------- (a) hand-written
def handwritten(model, spec, x: torch.Tensor, y: torch.Tensor, batch: int, epochs: int) -> int:
    opt = make_optimizer(model, spec.optim)     # the worker's optimizer, built the same way
    steps = len(y) // batch
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, spec.optim.lr, total_steps=steps * epochs)
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
class ToTensorLike:
    """torchvision's ``ToTensor`` on a PIL image, step for step: the usage log, the type checks, the
    uint8 array copy, HWC view, CHW permute, float and /255."""

    def __call__(self, pic: Image.Image) -> torch.Tensor:
        torch._C._log_api_usage_once("torchvision.transforms.functional.to_tensor")
        if not isinstance(pic, Image.Image | np.ndarray):
            raise TypeError(f"pic should be PIL Image or ndarray. Got {type(pic)}")
        dtype = torch.get_default_dtype()
        nptype = {"I": np.int32, "I;16": np.int16, "F": np.float32}.get(pic.mode, np.uint8)
        img = torch.from_numpy(np.array(pic, nptype, copy=True))
        if pic.mode == "1":
            img = 255 * img
        img = img.view(pic.size[1], pic.size[0], len(pic.getbands()))
        img = img.permute((2, 0, 1)).contiguous()
        if isinstance(img, torch.ByteTensor):
            return img.to(dtype=dtype).div(255)
        return img


class NormalizeLike(torch.nn.Module):
    """torchvision's ``Normalize`` (an ``nn.Module``), step for step: checks, a clone, mean and std as
    tensors, the zero-std check, then in-place subtract and divide."""

    def __init__(self, mean: tuple[float, ...], std: tuple[float, ...]) -> None:
        super().__init__()
        self.mean, self.std = mean, std

    def forward(self, tensor: torch.Tensor) -> torch.Tensor:
        torch._C._log_api_usage_once("torchvision.transforms.functional.normalize")
        if not isinstance(tensor, torch.Tensor) or not tensor.is_floating_point() or tensor.ndim < 3:
            raise TypeError("expected a float image tensor")
        tensor = tensor.clone()
        mean = torch.as_tensor(self.mean, dtype=tensor.dtype, device=tensor.device)
        std = torch.as_tensor(self.std, dtype=tensor.dtype, device=tensor.device)
        if (std == 0).any():
            raise ValueError(f"std evaluated to zero after conversion to {tensor.dtype}")
        if mean.ndim == 1:
            mean = mean.view(-1, 1, 1)
        if std.ndim == 1:
            std = std.view(-1, 1, 1)
        return tensor.sub_(mean).div_(std)


class ComposeLike:
    def __init__(self, transforms: list) -> None:
        self.transforms = transforms

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img


class MnistLike(Dataset):
    """torchvision's ``MNIST`` as the example uses it: uint8 images (N, H, W) and int64 targets held
    as tensors, a PIL image made per sample, then the transform."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor, transform, flatten: bool) -> None:
        self.data, self.targets, self.transform, self.flatten = images, labels, transform, flatten

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index: int):
        img, target = self.data[index], int(self.targets[index])
        img = Image.fromarray(img.numpy(), mode="L")
        img = self.transform(img)
        return (img.flatten() if self.flatten else img), target   # flat for the MLP template


def examples_mnist(model, dataset: Dataset, device: torch.device, batch: int, epochs: int, lr: float) -> int:
    train_kwargs = {"batch_size": batch}
    if device.type == "cuda":
        train_kwargs |= {"num_workers": 1, "pin_memory": True, "shuffle": True}
    train_loader = DataLoader(dataset, **train_kwargs)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=5e-4)  # one group, the default kernels
    log = io.StringIO()
    model.train()
    seen = 0
    for epoch in range(1, epochs + 1):
        for batch_idx, (data, target) in enumerate(train_loader):
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            output = model(data)
            loss = F.cross_entropy(output, target)   # the example's log_softmax + nll_loss, in one
            loss.backward()
            optimizer.step()
            if batch_idx % 10 == 0:
                print(f"Train Epoch: {epoch} [{batch_idx * len(data)}/{len(train_loader.dataset)} ({100.0 * batch_idx / len(train_loader):.0f}%)]\tLoss: {loss.item():.6f}", file=log)
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
        # The same train split as 8-bit images (the digits' 0..16 levels stretched to 0..255, as MNIST
        # stores them); the example normalises with MNIST's global mean and std, here the digits'.
        raw = (s.train.x * s.std.view((1, -1) + (1,) * (x.dim() - 2)) + s.mean.view((1, -1) + (1,) * (x.dim() - 2)))
        images = (raw * (255.0 / 16.0)).round().clamp(0, 255).to(torch.uint8).reshape(len(raw), 8, 8)
        norm = NormalizeLike((float(raw.mean()) / 16.0,), (float(raw.std()) / 16.0,))
        dataset = MnistLike(images, s.train.y, ComposeLike([ToTensorLike(), norm]), flatten=x.dim() == 2)
        init = copy.deepcopy(job.model.state_dict())
        lr = job.spec.optim.lr

        # (a) holds its model and data in the memory format the worker chose; (b) as the example has it.
        channels_last = job.setup.channels_last
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)

        def fresh(channels_last: bool = False):
            m = build_module(job.setup.graph, device=device)
            m.load_state_dict(init)
            return m.to(memory_format=torch.channels_last) if channels_last else m

        # (a) gets the same compile mode as the worker (its model compiled once, reused every round);
        # (b) stays eager, as the example is written. Every round starts every method from the same
        # weights and a fresh optimizer state; only the training is timed.
        model_a = fresh(channels_last)
        compiled_a = torch.compile(model_a) if args.compile else model_a
        model_b = fresh()
        methods = {
            STUDIO: (lambda: restart(job, init), lambda: studio_epochs(job, epochs)),
            A: (lambda: model_a.load_state_dict(init),
                lambda: handwritten(compiled_a, job.spec, x, y, args.batch_size, epochs)),
            B: (lambda: model_b.load_state_dict(init),
                lambda: examples_mnist(model_b, dataset, device, args.batch_size, epochs, lr)),
        }
        rates = run_rounds(methods, args.rounds)
        job.recorder.close()
        job.store.close()
    print(f"CPU, {template} on {label}, batch {args.batch_size}, {epochs} epoch(s) a round, {args.rounds} rounds, "
          f"{torch.get_num_threads()} threads, compile {mode} for studio and (a)")
    report(rates, {A: 0.97, B: 2.0})


STUDIO, A, B = "studio (worker loop)", "(a) hand-written", "(b) examples/mnist"


def run_rounds(methods: dict, rounds: int) -> dict[str, list[float]]:
    """Samples/s of each method in each round, methods interleaved within a round (after a warm-up
    round that is not counted: allocator, thread pools, first-call paths, compiling). Every other
    round runs them in reverse order: on this shared machine the place in a round alone moved a
    ratio by up to 10%, and alternating gives every method the same places."""
    rates: dict[str, list[float]] = {name: [] for name in methods}
    for r in range(rounds + 1):
        order = list(methods.items())
        for name, (reset, train) in order if r % 2 else reversed(order):
            reset()
            rate = timed(train)
            if r:
                rates[name].append(rate)
    return rates


def report(rates: dict[str, list[float]], goals: dict[str, float]) -> None:
    """Each method's best and median round; the ratios as the median of the per-round ratios (a round's
    methods run back to back, so a slow spell of a shared machine hits both sides of its ratio) and
    their spread, and as best round over best round."""
    print(f"  {'':<22} {'best round':>12} {'median':>12}  samples/s")
    for name, sps in rates.items():
        print(f"  {name:<22} {max(sps):>12,.0f} {statistics.median(sps):>12,.0f}")
    for other, goal in goals.items():
        paired = sorted(ours / theirs for ours, theirs in zip(rates[STUDIO], rates[other], strict=True))
        q1, q3 = paired[len(paired) // 4], paired[(3 * len(paired)) // 4]
        best = max(rates[STUDIO]) / max(rates[other])
        print(f"  ratio studio / {other[:3]} = {statistics.median(paired):.3f} median of rounds "
              f"(quartiles {q1:.3f}-{q3:.3f}), {best:.3f} best/best   goal >= {goal:g}")


def flat_digits(folder: Path) -> Path:
    """The embedded digits as 64 features per sample, for the MLP template."""
    with np.load(DIGITS) as z:
        images, labels = z["images"], z["labels"]
    path = folder / "digits_flat.npz"
    np.savez(path, x=images.reshape(len(images), 64), y=labels)
    return path


def gpu_section(args: argparse.Namespace) -> None:
    """resnet18_cifar on synthetic data: (a) hand-written eager fp32, the worker's loop in eager fp32,
    and the worker's loop with torch.compile + bf16 + channels_last, interleaved for a few rounds."""
    rng = np.random.default_rng(0)
    epochs, rounds, batch = 2, max(3, args.rounds // 3), 512
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "synthetic.npz"
        np.savez(data, x=rng.integers(0, 255, (50000, 3, 32, 32), dtype=np.uint8), y=rng.integers(0, 10, 50000))
        jobs, first = {}, {}
        for label, precision in ((EAGER, {"dtype": "fp32", "compile": "off", "channels_last": False}),
                                 (FAST, {"dtype": "bf16", "compile": "default", "channels_last": True})):
            spec = {"model": {"graph": str(TEMPLATES / "resnet18_cifar.graph.json")}, "device": "cuda",
                    "data": {"dataset": str(data), "test_fraction": 0.0, "val_fraction": 0.1},
                    "train": {"epochs": epochs, "batch_size": batch}, "precision": precision}
            job = jobs[label] = studio_job(spec, Path(tmp) / label.replace(" ", "_"))
            t0 = time.perf_counter()
            studio_epochs(job, 1)             # the first epoch, compiling included
            torch.cuda.synchronize()
            first[label] = time.perf_counter() - t0
        eager = jobs[EAGER]
        init = {k: v.clone() for k, v in eager.model.state_dict().items()}
        fast_init = {k: v.clone() for k, v in jobs[FAST].model.state_dict().items()}
        s = eager.setup.splits
        n_train = len(s.train)
        x, y = s.train.x.to("cuda"), s.train.y.to("cuda")
        model_a = build_module(eager.setup.graph, device="cuda")

        def studio(job):
            return lambda: (studio_epochs(job, epochs), torch.cuda.synchronize())[0]

        methods = {
            A: (lambda: model_a.load_state_dict(init), lambda: handwritten(model_a, eager.spec, x, y, batch, epochs)),
            EAGER: (lambda: restart(eager, init), studio(eager)),
            FAST: (lambda: restart(jobs[FAST], fast_init), studio(jobs[FAST])),
        }
        rates = run_rounds(methods, rounds)
        compile_s = [json.loads(line)["seconds"] for line in jobs[FAST].emitter.stream.getvalue().splitlines()
                     if '"compile_done"' in line]
        for job in jobs.values():
            job.recorder.close()
            job.store.close()
    print(f"GPU ({torch.cuda.get_device_name()}), resnet18_cifar, synthetic 3x32x32 ({n_train:,} train), batch {batch}, "
          f"{epochs} epochs a round, {rounds} rounds")
    print(f"  {'':<30} {'best round':>12} {'median':>12}  samples/s")
    for name, sps in rates.items():
        extra = f"  first epoch {first[name]:.1f} s" if name in first else ""
        print(f"  {name:<30} {max(sps):>12,.0f} {statistics.median(sps):>12,.0f}{extra}")
    if compile_s:
        print(f"  compile (first step, default mode): {compile_s[0]:.1f} s")
    for num, den in ((EAGER, A), (FAST, EAGER)):
        paired = sorted(n / d for n, d in zip(rates[num], rates[den], strict=True))
        print(f"  ratio {num} / {den} = {statistics.median(paired):.3f} median of rounds "
              f"({paired[0]:.3f}-{paired[-1]:.3f})")


EAGER, FAST = "studio eager fp32", "studio compile + bf16 + CL"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=4)   # rounds of about a second: shorter ones are noisier
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--compile", action="store_true", help="compile the model in studio and (a) (CPU section)")
    parser.add_argument("--gpu-only", action="store_true", help="run the GPU section alone")
    args = parser.parse_args()
    if args.gpu_only:
        gpu_section(args)
        return 0
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
