"""Training throughput on the CPU: the worker against a user's own PyTorch script, each its own process.

    python benchmarks/train_throughput.py [--rounds R] [--load K] [--cases digits_cnn,lenet5] [--epochs N]
                                          [--variant NAME=VAR=VALUE[,VAR=VALUE]] [--gpu-only]

Two processes per measurement, as a user meets them:

* ``worker``: the real worker, ``python -m trainer run SPEC`` (the studio starts the same command), with
  the threading it chooses itself (:mod:`trainer.threads`). Its time is the ``finished`` event's
  seconds: every epoch with its val pass, metrics, run store writes and checkpoints (the defaults);
  torch's import and the setup are left out.
* ``hand``: ``benchmarks/hand_loop.py``, a careful engineer's plain PyTorch loop over the same model,
  initial weights, splits, batch, AdamW + OneCycle and channels_last, with PyTorch's defaults for
  threads and OpenMP waiting, and a val pass per epoch; its time is its epochs', imports and data
  loading left out.

The cases: ``digits_cnn`` on the embedded digits, 10 epochs; ``lenet5`` on 14k 32x32 images (the digits
scaled up, repeated with noise), 3 epochs. Each runs quiet and beside ``--load`` CPU-bound processes
(pure-Python busy loops, started before and stopped after each measurement).

Rounds interleave every method and condition, every other round in reverse order. On this shared
machine the speed drifts between rounds by more than the effects measured, so each ratio is the
median of per-round ratios (the two sides of a ratio run back to back in one round), printed with the
load average. Goals: quiet, hand / worker >= 1.0; worker loaded / worker quiet <= 2.5. The script's time alone
moves by ~10% between rounds (its page faults): a quiet ratio a few percent from 1.0 needs ``--rounds 10``
(about 12 minutes for both cases on two cores); a median of 5 fell on either side of it.
``--variant`` adds worker configurations (environment variables), e.g.
``--variant pytorch=TORCH_STUDIO_THREADS=default``, ``--variant passive=TORCH_STUDIO_THREADS=passive`` or
``--variant spin=GOMP_SPINCOUNT=100000`` (:mod:`trainer.threads`). Each line gives the page faults of the
whole process (imports included: a heap that gives a step's pages back shows here). A worker's line ends with the CPU
threads it trained with (its ``system/threads`` samples: ``2``, or ``1-2`` where it changed them).
``--epochs`` shortens every case (a busy machine makes PyTorch's default spinning take minutes). With CUDA, the GPU section follows
(``gpu_throughput.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trainer.checks import setup  # noqa: E402
from trainer.data import DIGITS  # noqa: E402
from trainer.job import build_model  # noqa: E402
from trainer.metrics import names  # noqa: E402
from trainer.spec import SCHEMA_VERSION, spec_from_dict  # noqa: E402
from trainer.store.runs import RunStore  # noqa: E402

TEMPLATES = ROOT / "assets" / "templates"
# What a measurement's process must not inherit from this one: it chooses (or defaults) its own.
CLEAN = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "TORCH_STUDIO_THREADS")
WORKER, HAND = "worker", "hand"


@dataclass(frozen=True)
class Case:
    template: str
    epochs: int
    label: str


CASES = {"digits_cnn": Case("digits_cnn", 10, "the embedded digits (1x8x8)"),
         "lenet5": Case("lenet5", 3, "14k 32x32 images")}


def lenet_images(path: Path) -> Path:
    """14,376 1x32x32 uint8 images: the digits scaled up 4x, eight copies with seeded noise."""
    with np.load(DIGITS) as z:
        images, labels = z["images"].astype(np.float32), z["labels"]
    big = np.kron(images.reshape(-1, 8, 8), np.ones((4, 4), np.float32)) * (255.0 / 16.0)
    rng = np.random.default_rng(0)
    x = np.concatenate([big + rng.normal(0, 12, big.shape) for _ in range(8)])
    np.savez(path, x=x.clip(0, 255).astype(np.uint8)[:, None], y=np.tile(labels, 8))
    return path


@dataclass(frozen=True)
class Prepared:
    spec: Path
    hand_args: list[str]


def prepared_cases(names: str, epochs: int | None, batch: int, tmp: Path) -> Iterator[tuple[str, Case, Prepared]]:
    """Each case of a comma-separated list (its epochs replaced when ``epochs`` is given), prepared in ``tmp``."""
    for name in names.split(","):
        case = CASES[name] if not epochs else Case(CASES[name].template, epochs, CASES[name].label)
        yield name, case, prepare(case, tmp / name, batch)


def prepare(case: Case, folder: Path, batch: int) -> Prepared:
    """The worker's spec, and for the hand loop the worker's own splits and initial weights."""
    folder.mkdir(parents=True)
    data: dict = {"dataset": "digits"}
    if case.template == "lenet5":
        data = {"dataset": str(lenet_images(folder / "images32.npz"))}
    graph = TEMPLATES / f"{case.template}.graph.json"
    spec = {"schema_version": SCHEMA_VERSION, "name": f"bench-{case.template}", "device": "cpu", "model": {"graph": str(graph)},
            "data": data, "train": {"epochs": case.epochs, "batch_size": batch},
            "precision": {"dtype": "fp32", "compile": "off"}}
    st = setup(spec_from_dict(spec))
    s = st.splits
    torch.save({"train_x": s.train.x, "train_y": s.train.y, "val_x": s.val.x, "val_y": s.val.y}, folder / "data.pt")
    torch.save({k: v.contiguous() for k, v in build_model(st).state_dict().items()}, folder / "weights.pt")
    (folder / "spec.json").write_text(json.dumps(spec))
    o = st.spec.optim
    hand = [str(ROOT / "benchmarks" / "hand_loop.py"), str(graph), str(folder / "data.pt"), str(folder / "weights.pt"),
            "--epochs", str(case.epochs), "--batch-size", str(batch), "--lr", str(o.lr),
            "--weight-decay", str(o.weight_decay)]
    return Prepared(folder / "spec.json", hand)


@dataclass(frozen=True)
class Measured:
    """One measurement: the seconds the process reports (worker: ``finished``; hand: its line), the worker's
    run id (None for the hand loop), and the page faults the whole process took (its imports included)."""

    seconds: float
    run_id: int | None
    faults: int


def run_seconds(command: list[str], extra_env: dict[str, str]) -> Measured:
    """Run one measurement's process."""
    env = {k: v for k, v in os.environ.items() if k not in CLEAN}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    env.update(extra_env)
    faults = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt   # the load's processes are reaped later
    done = subprocess.run([sys.executable, *command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    faults = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt - faults
    for line in done.stdout.splitlines():
        event = json.loads(line) if line.startswith("{") else {}
        if event.get("event") == "finished" or ("seconds" in event and "event" not in event):
            return Measured(float(event["seconds"]), event.get("run_id"), faults)
    raise RuntimeError(f"{command[:3]} did not finish (exit {done.returncode}): {done.stderr[-2000:]}")


class Load:
    """``count`` CPU-bound processes for the duration of a ``with`` block."""

    def __init__(self, count: int) -> None:
        self.count, self.procs = count, []

    def __enter__(self) -> Load:
        self.procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(self.count)]
        time.sleep(0.5)   # running before the measured process starts
        return self

    def __exit__(self, *exc: object) -> None:
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()


def threads_used(db: str, run_id: int | None) -> str:
    """The thread counts a worker run recorded (``system/threads``), as ``2`` or ``1-2``."""
    if run_id is None:
        return ""
    counts = [int(v) for _s, _n, v in RunStore(db).metrics(run_id, names.THREADS.name) if v is not None]
    return f"threads {min(counts)}-{max(counts)}" if counts and min(counts) != max(counts) else \
        f"threads {counts[0]}" if counts else ""


def measure(prepared: Prepared, db: str, variants: dict[str, dict[str, str]], rounds: int,
            load: int) -> dict[tuple[str, str], list[float]]:
    """Seconds of every (condition, method) in every round, interleaved, every other round reversed."""
    methods: dict[str, tuple[list[str], dict[str, str]]] = {HAND: (prepared.hand_args, {})}
    for name, env in variants.items():
        methods[name] = (["-m", "trainer", "run", str(prepared.spec), "--db", db], env)
    times: dict[tuple[str, str], list[float]] = {}
    for r in range(rounds):
        for condition, busy in (("quiet", 0), ("loaded", load)):
            order = list(methods) if r % 2 == 0 else list(reversed(methods))
            for name in order:
                command, env = methods[name]
                with Load(busy):
                    done = run_seconds(command, env)
                times.setdefault((condition, name), []).append(done.seconds)
                print(f"  round {r + 1} {condition:<6} {name:<12} {done.seconds:7.2f} s   load {loadavg()}   "
                      f"faults {done.faults / 1000:5.0f}k   {threads_used(db, done.run_id)}", flush=True)
    return times


def paired(num: list[float], den: list[float]) -> str:
    ratios = sorted(n / d for n, d in zip(num, den, strict=True))
    return f"{statistics.median(ratios):.2f} (rounds {ratios[0]:.2f}-{ratios[-1]:.2f})"


def report(times: dict[tuple[str, str], list[float]], workers: list[str]) -> None:
    print(f"  {'condition':<8} {'method':<12} {'median s':>9} {'best s':>8}")
    for (condition, name), seconds in times.items():
        print(f"  {condition:<8} {name:<12} {statistics.median(seconds):>9.2f} {min(seconds):>8.2f}")
    for name in workers:
        q, lo = times[("quiet", name)], times[("loaded", name)]
        print(f"  {name}: quiet hand/{name} = {paired(times[('quiet', HAND)], q)}   goal >= 1.0")
        print(f"  {name}: loaded/quiet = {paired(lo, q)}   goal <= 2.5;   "
              f"loaded hand/{name} = {paired(times[('loaded', HAND)], lo)}")
    print(f"  hand: loaded/quiet = {paired(times[('loaded', HAND)], times[('quiet', HAND)])}")


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def parse_variant(text: str) -> tuple[str, dict[str, str]]:
    name, _, assignments = text.partition("=")
    env = dict(a.split("=", 1) for a in assignments.split(",") if "=" in a)
    if not name or not env:
        raise SystemExit(f"--variant {text!r}: expected NAME=VAR=VALUE[,VAR=VALUE]")
    return name, env


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--load", type=int, default=2, help="competing CPU-bound processes (default 2)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--cases", default=",".join(CASES), help=f"of {', '.join(CASES)}")
    parser.add_argument("--epochs", type=int, help="epochs of every case (default: the case's own)")
    parser.add_argument("--variant", action="append", default=[], help="another worker configuration")
    parser.add_argument("--gpu-only", action="store_true", help="run the GPU section alone")
    args = parser.parse_args()
    if not args.gpu_only:
        variants = {WORKER: {}} | dict(parse_variant(v) for v in args.variant)
        with tempfile.TemporaryDirectory() as tmp:
            for _name, case, prepared in prepared_cases(args.cases, args.epochs, args.batch_size, Path(tmp)):
                print(f"CPU, {case.template} on {case.label}, batch {args.batch_size}, {case.epochs} epochs, "
                      f"{args.rounds} rounds, {os.cpu_count()} cores, loaded = {args.load} busy processes; "
                      f"load average {loadavg()}", flush=True)
                times = measure(prepared, f"sqlite:///{Path(tmp) / 'runs.sqlite'}", variants, args.rounds, args.load)
                report(times, list(variants))
    from gpu_throughput import run as gpu_run  # a sibling script: this folder is on sys.path

    return gpu_run(args.rounds * 3)


if __name__ == "__main__":
    raise SystemExit(main())
