"""The worker's training step beside CPU hogs, per thread policy, in the share the scheduler gives it.

    python benchmarks/fair_share.py [--template lenet5] [--hogs 2] [--steps 300] [--rounds 2] [--max-s 120]

``train_throughput.py`` times the loaded worker by the wall clock, which on a shared machine measures
everyone else too. Here each measurement is one process that starts ``--hogs`` pure-Python busy loops
(as ``train_throughput.py``'s load), then times ``--steps`` training steps of the template (built as the
worker builds it: channels_last for a convnet, the recipe's fused AdamW, the worker's ``train_step``),
reading its own CPU time and the hogs' (``/proc/PID/stat``) over the same steps. The hogs and the steps
together saturate the cores this group of processes gets, so ``(own + hogs' CPU) / cores`` is the wall
the steps would take beside the hogs on an otherwise idle machine ("idle-equivalent"), whatever else
runs; and ``hogs / own`` says what share the steps got (2.0 beside two hogs: one third of two cores,
the fair share of one thread among three).

Policies (each its own process: OpenMP reads its wait policy once): ``1`` thread; ``2`` threads with
PyTorch's default waiting (spinning); ``2 passive`` (``OMP_WAIT_POLICY=PASSIVE``); ``2 spin1e4``
(``GOMP_SPINCOUNT=10000``); ``1 turn3`` and ``1 turn10``: one thread asking the scheduler for 3 or 10 ms
turns (:func:`trainer.threads.adaptive.set_turn`; the worker asks for 10 beside busy processes, the ``1``
policy keeps the default); and ``1 quiet`` (no hogs: the one-thread CPU per step). A process that has
not finished its steps after ``--max-s`` seconds stops and reports the steps it did. No assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
POLICIES: dict[str, tuple[int, int, dict[str, str]]] = {   # name: (threads, hogs or -1 for --hogs, environment)
    "1 quiet": (1, 0, {}),
    "1": (1, -1, {}),
    "2": (2, -1, {}),
    "2 passive": (2, -1, {"OMP_WAIT_POLICY": "PASSIVE"}),
    "2 spin1e4": (2, -1, {"GOMP_SPINCOUNT": "10000"}),
    "1 turn3": (1, -1, {"TURN_MS": "3"}),
    "1 turn10": (1, -1, {"TURN_MS": "10"}),
}
CLEAN = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "TORCH_STUDIO_THREADS")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (every thread)."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def inner(template: str, threads: int, hogs: int, steps: int, max_s: float) -> dict[str, float]:
    """In the measured process: the hogs started first, then the steps timed (own and hogs' CPU)."""
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(hogs)]
    try:
        import torch

        sys.path.insert(0, str(ROOT))
        from graph_editor.building import build_module
        from graph_editor.model import load_graph
        from trainer.loop import make_train_step
        from trainer.optim import make_optimizer
        from trainer.spec import OptimSpec
        from trainer.threads.adaptive import set_turn

        torch.set_num_threads(threads)
        if os.environ.get("TURN_MS"):   # the scheduler turn the worker asks for at one thread beside busy processes
            set_turn(int(float(os.environ["TURN_MS"]) * 1e6))
        graph = load_graph(ROOT / "assets" / "templates" / f"{template}.graph.json")
        torch.manual_seed(0)
        model = build_module(graph, device="cpu")
        shape = tuple(graph.input_spec.shape)
        x = torch.randn(64, *shape)
        if x.dim() == 4:
            model, x = model.to(memory_format=torch.channels_last), x.contiguous(memory_format=torch.channels_last)
        y = torch.randint(0, graph.num_classes, (64,))
        opt = make_optimizer(model, OptimSpec(), lr_tensor=False, device=torch.device("cpu"))
        step, _ = make_train_step(model, opt, device=torch.device("cpu"), precision="fp32", label_smoothing=0.0)
        for _ in range(20):
            step(x, y)
        own0, hogs0, t0, done = time.process_time(), sum(cpu_seconds(p.pid) for p in busy), time.perf_counter(), 0
        while done < steps and time.perf_counter() - t0 < max_s:
            step(x, y)
            done += 1
        own, wall = time.process_time() - own0, time.perf_counter() - t0
        hog = sum(cpu_seconds(p.pid) for p in busy) - hogs0
        return {"steps": done, "wall": wall, "own": own, "hogs": hog}
    finally:
        for p in busy:
            p.kill()
        for p in busy:
            p.wait()


def measure(args: argparse.Namespace, name: str) -> dict[str, float]:
    threads, hogs, extra = POLICIES[name]
    env = {k: v for k, v in os.environ.items() if k not in CLEAN} | extra
    command = [sys.executable, __file__, "--inner", args.template, str(threads), str(args.hogs if hogs < 0 else hogs),
               str(args.steps), str(args.max_s)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=args.max_s + 120)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"{name}: no result (exit {done.returncode}): {done.stderr[-1500:]}")
    return dict(json.loads(lines[-1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--template", default="lenet5")
    parser.add_argument("--hogs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-s", type=float, default=120.0)
    parser.add_argument("--policies", default=",".join(POLICIES), help=f"of {', '.join(POLICIES)}")
    parser.add_argument("--inner", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        template, threads, hogs, steps, max_s = args.inner
        print(json.dumps(inner(template, int(threads), int(hogs), int(steps), float(max_s))), flush=True)
        return 0
    cores = len(os.sched_getaffinity(0))
    print(f"{args.template}, batch 64, {args.steps} steps, beside {args.hogs} hogs, {cores} cores", flush=True)
    names = args.policies.split(",")
    for r in range(args.rounds):
        for name in names if r % 2 == 0 else list(reversed(names)):
            m = measure(args, name)
            n = max(m["steps"], 1)
            equivalent = (m["own"] + m["hogs"]) / cores if m["hogs"] else m["own"]
            print(f"  round {r + 1} {name:<10} steps {m['steps']:4.0f}  own CPU {m['own'] / n * 1e3:6.2f} ms/step  "
                  f"hogs/own {m['hogs'] / max(m['own'], 1e-9):5.2f}  idle-equivalent {equivalent / n * 1e3:7.2f} "
                  f"ms/step  (wall {m['wall'] / n * 1e3:7.2f} ms/step, load {Path('/proc/loadavg').read_text()[:14]})",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
