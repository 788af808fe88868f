"""The worker's own cost against a plain PyTorch loop, in CPU time on one thread each.

    python benchmarks/worker_cpu.py [--rounds R] [--cases digits_cnn,lenet5] [--epochs N] [--profile DIR]
                                    [--compare CHECKOUT]

``train_throughput.py`` times the two sides by the wall clock, which on a shared machine measures the
other processes as much as ours. CPU time (user + system, every thread of the process) with a single
compute thread on each side does not depend on what else runs, so it shows what the worker does
beyond the hand loop's work (checkpoints, store writes, per-step bookkeeping) on a busy machine too:

* ``hand``: ``benchmarks/hand_loop.py`` with ``OMP_NUM_THREADS=1``: the CPU seconds of its epochs;
* ``worker``: the real worker (``trainer.worker.main``, ``TORCH_STUDIO_THREADS=1``) in its own process
  (this script with ``--inner``): the CPU seconds of ``run_epochs``, every epoch with its val pass,
  metrics, store writes and checkpoints (the defaults), the setup and the final report left out.

The same cases, splits, initial weights and recipe as ``train_throughput.py``. Each round runs both
sides back to back (every other round in reverse order); the ratio printed is the median of the
rounds' hand / worker (above 1.0: the worker costs less CPU than the hand loop). ``--profile DIR``
also writes each worker's cProfile of ``run_epochs`` there (``worker-CASE-ROUND.prof``, this thread's
CPU). ``--compare CHECKOUT`` adds the worker of another checkout of the project (say the commit before
a change) to every round, as a third side: before/after in one run.
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
from typing import Any

# The checkout whose trainer runs: this one, or (the --compare side's process) the one it names
ROOT = Path(os.environ.get("WORKER_CPU_ROOT") or Path(__file__).resolve().parents[1])
sys.path.insert(0, str(ROOT))

CLEAN = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "TORCH_STUDIO_THREADS")
MARK = "worker_cpu_seconds"


def inner(spec: str, db: str, profile: str | None) -> int:
    """In the worker's own process: run it on one thread and print the CPU seconds of its epochs."""
    os.environ["TORCH_STUDIO_THREADS"] = "1"
    from trainer.threads import configure

    configure()                               # before torch is imported, as ``python -m trainer`` does
    import cProfile

    import trainer.worker as worker

    measured: dict[str, float] = {}
    run_epochs = worker.run_epochs

    def timed(job):  # noqa: ANN001, ANN202 - trainer.job.Job -> str
        cpu0, wall0 = time.process_time(), time.perf_counter()
        profiler = cProfile.Profile(time.thread_time) if profile else None   # this thread's CPU
        status = profiler.runcall(run_epochs, job) if profiler else run_epochs(job)
        job.recorder.flush()                  # the last epoch's writes (its checkpoint) are its cost too
        measured.update(cpu=time.process_time() - cpu0, wall=time.perf_counter() - wall0)
        if profiler:
            profiler.dump_stats(profile)
        return status

    worker.run_epochs = timed
    code = worker.main(["run", spec, "--db", db])
    print(json.dumps({MARK: measured.get("cpu"), "seconds": measured.get("wall"), "exit": code}), flush=True)
    return code


def run_side(command: list[str], env_extra: dict[str, str]) -> tuple[float, float]:
    """Run one side's process; (CPU seconds, wall seconds) of its epochs."""
    env = {k: v for k, v in os.environ.items() if k not in CLEAN}
    root = env_extra.get("WORKER_CPU_ROOT", str(ROOT))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH", "")]))
    env.update(env_extra)
    done = subprocess.run([sys.executable, *command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    for line in done.stdout.splitlines():
        out = json.loads(line) if line.startswith("{") else {}
        cpu = out.get(MARK, out.get("cpu_seconds"))
        if cpu is not None and "event" not in out:
            return float(cpu), float(out["seconds"])
    raise RuntimeError(f"{command[:2]} did not finish (exit {done.returncode}): {done.stderr[-2000:]}")


def measure(name: str, prepared: Any, tmp: Path, rounds: int, profile: Path | None, compare: Path | None) -> None:
    """Every side once a round (every other round in reverse order); print the rounds and the ratios."""
    from train_throughput import loadavg

    sides: dict[str, tuple[list[str], dict[str, str]]] = {"hand": (prepared.hand_args, {"OMP_NUM_THREADS": "1"})}
    for side, root in (("worker", None), ("compared", compare)):
        if side == "worker" or root:
            inner_cmd = [str(Path(__file__).resolve()), "--inner", str(prepared.spec),
                         f"sqlite:///{tmp / f'{side}.sqlite'}"]
            sides[side] = (inner_cmd, {"WORKER_CPU_ROOT": str(root.resolve())} if root else {})
    cpu: dict[str, list[float]] = {side: [] for side in sides}
    for r in range(rounds):
        for side in (list(sides) if r % 2 == 0 else list(reversed(sides))):
            command, env = sides[side]
            if side != "hand":
                command = [*command, str(profile.resolve() / f"{side}-{name}-{r + 1}.prof") if profile else ""]
            seconds, wall = run_side(command, env)
            cpu[side].append(seconds)
            print(f"  round {r + 1} {side:<8} CPU {seconds:6.2f} s  wall {wall:6.2f} s   load {loadavg()}", flush=True)
    for side in [s for s in cpu if s != "hand"]:
        ratios = sorted(h / w for h, w in zip(cpu["hand"], cpu[side], strict=True))
        print(f"  {side}: median CPU hand {statistics.median(cpu['hand']):.2f} s, {side} "
              f"{statistics.median(cpu[side]):.2f} s; hand/{side} = {statistics.median(ratios):.2f} "
              f"(rounds {ratios[0]:.2f}-{ratios[-1]:.2f})   goal >= 1.0", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--cases", default="digits_cnn", help="of digits_cnn, lenet5 (train_throughput.py's)")
    parser.add_argument("--epochs", type=int, help="epochs of every case (default: the case's own)")
    parser.add_argument("--profile", type=Path, help="write the worker's cProfile of its epochs in this folder")
    parser.add_argument("--compare", type=Path, help="another checkout whose worker runs beside this one's")
    parser.add_argument("--inner", nargs=3, metavar=("SPEC", "DB", "PROFILE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        spec, db, profile = args.inner
        return inner(spec, db, profile or None)
    from train_throughput import loadavg, prepared_cases  # a sibling script: this folder is on sys.path

    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name, case, prepared in prepared_cases(args.cases, args.epochs, args.batch_size, Path(tmp)):
            print(f"CPU seconds, one thread each: {case.template} on {case.label}, batch {args.batch_size}, "
                  f"{case.epochs} epochs, {args.rounds} rounds; load average {loadavg()}", flush=True)
            measure(name, prepared, Path(tmp), args.rounds, args.profile, args.compare)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
