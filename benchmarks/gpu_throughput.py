"""Training throughput on a GPU: the worker's loop against a hand-written PyTorch loop, same run.

    python benchmarks/gpu_throughput.py        (or python benchmarks/train_throughput.py --gpu-only)

``resnet18_cifar`` on synthetic 3x32x32 data through the worker's loop (``trainer.job`` + ``trainer.loop``,
its metrics written to a real SQLite run store and its events to a stream) in this process: (a) a
hand-written eager fp32 loop, the worker's loop in eager fp32, and the worker's loop with torch.compile
+ bf16 + channels_last, interleaved for a few rounds. For the worker's two it also reports the model
FLOP utilisation (the graph's own FLOP count, training as 3x the forward, over the GPU's dense bf16
peak) and the share of the time spent getting batches (``trainer.metrics.utilisation``). One process is fair
here: the GPU, not the host's threads, sets the pace (the CPU comparison, where threading decides,
runs each loop as its own process: ``train_throughput.py``).
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from graph_editor.analysis import analyze
from graph_editor.building import build_module
from trainer.checks import setup
from trainer.job import build_model, make_job
from trainer.loop import EpochTotals, Loop, train_one_epoch
from trainer.metrics.utilisation import DataWait, mfu, peak_tflops
from trainer.optim import make_optimizer
from trainer.protocol import events as ev
from trainer.protocol.controls import Controls
from trainer.spec import spec_from_dict
from trainer.store.runs import RunStore

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


def studio_epochs(job, epochs: int, wait: DataWait | None = None) -> int:
    """The worker's epoch loop without evaluation: what a training epoch costs inside the worker;
    ``wait`` sums the time spent getting batches."""
    loop = Loop(lr_at=job.lr_at, callbacks=job.callbacks, interval_s=job.spec.train.metrics_interval_s)
    train, samples = job.loaders["train"], 0
    for e in range(epochs):
        batches = train.batches(train.order())
        step, _ = train_one_epoch(job.step_fn, job.opt, wait.wrap(batches) if wait else batches, epoch=e + 1,
                                  step=job.step,
                                  batch_size=train.batch_size, window=job.window, totals=EpochTotals(), loop=loop)
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


def timed(fn) -> float:
    t0 = time.perf_counter()
    n = fn()
    return n / (time.perf_counter() - t0)


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

        waits = {EAGER: DataWait(), FAST: DataWait()}
        spent = dict.fromkeys(waits, 0.0)

        def studio(name):
            def train() -> int:
                t0 = time.perf_counter()
                n = studio_epochs(jobs[name], epochs, waits[name])
                torch.cuda.synchronize()
                spent[name] += time.perf_counter() - t0
                return n
            return train

        methods = {
            A: (lambda: model_a.load_state_dict(init), lambda: handwritten(model_a, eager.spec, x, y, batch, epochs)),
            EAGER: (lambda: restart(eager, init), studio(EAGER)),
            FAST: (lambda: restart(jobs[FAST], fast_init), studio(FAST)),
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
    flops, peak = analyze(eager.setup.graph).total_flops, peak_tflops(torch.cuda.get_device_name())
    for name in waits:
        util = (f"MFU {mfu(flops, statistics.median(rates[name]), peak):.1%} median, "
                f"{mfu(flops, max(rates[name]), peak):.1%} best of {peak:g} dense bf16 TFLOP/s"
                if peak else "MFU: this GPU's peak is not known (trainer.metrics.utilisation.PEAKS_TFLOPS)")
        print(f"  {name}: {util} ({flops / 1e9:.2f} GFLOP forward a sample, training 3x); waiting on data "
              f"{waits[name].seconds / spent[name]:.1%} of the time (goal < 2%)")
    for num, den in ((EAGER, A), (FAST, EAGER)):
        paired = sorted(n / d for n, d in zip(rates[num], rates[den], strict=True))
        print(f"  ratio {num} / {den} = {statistics.median(paired):.3f} median of rounds "
              f"({paired[0]:.3f}-{paired[-1]:.3f})")


EAGER, FAST = "studio eager fp32", "studio compile + bf16 + CL"


A = "(a) hand-written"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    return run(parser.parse_args().rounds)


def run(rounds: int) -> int:
    if not torch.cuda.is_available():
        print("GPU section skipped: CUDA is not available")
        return 0
    gpu_section(argparse.Namespace(rounds=rounds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
