"""The worker's CPU threading on a quiet machine and beside competing load, against PyTorch's default.

    python benchmarks/worker_threads.py [--epochs N] [--rounds R] [--load K]

Trains ``digits_cnn`` on the embedded digits (fp32, eager, CPU) in the real worker process,
``python -m trainer run SPEC``, and takes the training time it reports (``finished.seconds``: torch's
import and the setup are left out). Threading is decided in that process before torch is imported
(:mod:`trainer.threads`), so every measurement is its own process:

* ``pytorch``: PyTorch's defaults (``TORCH_STUDIO_THREADS=default``): one thread per core, OpenMP's
  default waiting (threads spin between parallel regions);
* ``one thread``: passive waiting and a single thread (what "threads from the cores left free"
  would choose beside busy processes on a 2-core machine);
* ``studio``: what the worker does by itself: passive waiting, one thread per usable core.

Each runs quiet, and with ``--load`` CPU-bound processes (pure-Python busy loops, one core each)
that the benchmark starts before and stops after each measurement. Configurations run interleaved
for ``--rounds`` rounds, every other round in reverse order; a time is the median over rounds, a
ratio pytorch's time over the configuration's (above 1: faster). No assertions: the machine may be
shared, and then "quiet" is only as quiet as the others let it be (the load average is printed).
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

from trainer.spec import SCHEMA_VERSION  # noqa: E402
from trainer.threads import SWITCH, plan, usable_cores  # noqa: E402

CONFIGS = {"pytorch": {SWITCH: "default"}, "one thread": {SWITCH: "1"}, "studio": {}}
CLEAN = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY", SWITCH)


def write_spec(folder: Path, epochs: int) -> Path:
    spec = {"schema_version": SCHEMA_VERSION, "name": "threads", "device": "cpu",
            "model": {"graph": str(ROOT / "assets" / "templates" / "digits_cnn.graph.json")},
            "train": {"epochs": epochs, "batch_size": 64},
            "checkpoints": {"best": False, "last": False}, "precision": {"dtype": "fp32", "compile": "off"}}
    path = folder / "spec.json"
    path.write_text(json.dumps(spec))
    return path


def train_seconds(spec: Path, db: str, extra_env: dict[str, str]) -> float:
    env = {k: v for k, v in os.environ.items() if k not in CLEAN}
    env.update(extra_env)
    done = subprocess.run([sys.executable, "-m", "trainer", "run", str(spec), "--db", db], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    for line in done.stdout.splitlines():
        event = json.loads(line) if line.startswith("{") else {}
        if event.get("event") == "finished":
            return float(event["seconds"])
    raise RuntimeError(f"the worker did not finish (exit {done.returncode}): {done.stderr[-2000:]}")


class Load:
    """``count`` CPU-bound processes for the duration of a ``with`` block."""

    def __init__(self, count: int) -> None:
        self.count, self.procs = count, []

    def __enter__(self) -> Load:
        self.procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(self.count)]
        time.sleep(0.5)   # running before the worker looks at the load
        return self

    def __exit__(self, *exc: object) -> None:
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--load", type=int, default=2, help="competing CPU-bound processes (default 2)")
    args = parser.parse_args()
    cores = usable_cores()
    print(f"{cores} usable core(s); load average {os.getloadavg()[0]:.2f} at the start; digits_cnn, "
          f"{args.epochs} epochs, {args.rounds} round(s); competing load: {args.load} busy process(es)")
    with tempfile.TemporaryDirectory() as tmp:
        spec, db = write_spec(Path(tmp), args.epochs), f"sqlite:///{Path(tmp) / 'runs.sqlite'}"
        times: dict[tuple[str, str], list[float]] = {}
        for r in range(args.rounds):
            for condition, busy in (("quiet", 0), ("loaded", args.load)):
                order = list(CONFIGS) if r % 2 == 0 else list(reversed(CONFIGS))
                for name in order:
                    with Load(busy):
                        chosen = plan({**CONFIGS[name]}, cores)
                        seconds = train_seconds(spec, db, CONFIGS[name])
                    times.setdefault((condition, name), []).append(seconds)
                    print(f"  round {r + 1} {condition:<6} {name:<10} {seconds:6.2f} s  "
                          f"(threads {chosen.threads or 'default'}: {chosen.reason})", flush=True)
    print(f"\n{'condition':<10} {'config':<10} {'median s':>9} {'vs pytorch':>11}")
    for condition in ("quiet", "loaded"):
        base = statistics.median(times[(condition, "pytorch")])
        for name in CONFIGS:
            t = statistics.median(times[(condition, name)])
            print(f"{condition:<10} {name:<10} {t:>9.2f} {base / t:>10.2f}x")


if __name__ == "__main__":
    main()
