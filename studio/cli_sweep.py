"""``torch-studio sweep``: an Optuna study over a graph's recipe and its own numbers (trainer.sweep).

Each trial is an ordinary worker run, kept in the run store and tagged ``study:NAME``, ``trial:N``;
the study lives in the same database. Progress goes to stderr, one line per trial event; ``--json``
prints the study as one object on stdout at the end. Ctrl-C (or SIGTERM) stops the sweep: its
workers stop cleanly, their trials are queued again for the next ``sweep --study NAME``, and the
study so far is printed; the exit status is then 128 + the signal's number (130 for Ctrl-C).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from typing import Any

from studio.cli_memory import parse_bytes


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep", help="search the recipe and the graph's numbers with Optuna, trial by trial")
    p.add_argument("graph", help="a *.graph.json file")
    p.add_argument("--data", default="digits", help="'digits' (embedded) or a dataset file/folder")
    p.add_argument("--trials", type=int, required=True, help="trials the study should hold (a resumed study "
                   "runs only the ones it lacks)")
    p.add_argument("--parallel", type=int, default=1, help="trials at a time (CPU processes share the cores)")
    p.add_argument("--epochs", type=int, help="epochs of each trial (default: the run spec's 10)")
    p.add_argument("--space", required=True, help="e.g. lr=1e-4..3e-2:log,batch_size=32|64|128,"
                   "node.conv1.out_channels=16..64:step16")
    p.add_argument("--prune", default="median", choices=("median", "halving", "hyperband", "none"),
                   help="Optuna's pruner on the epochs' objective (default median)")
    p.add_argument("--budget", type=parse_bytes, metavar="SIZE", help="memory a trial may need, e.g. 512MiB: "
                   "a trial predicted to need more is pruned before its worker starts")
    p.add_argument("--metric", default="val_accuracy", choices=("val_accuracy", "val_loss"),
                   help="the objective (val_accuracy is maximised, val_loss minimised)")
    p.add_argument("--study", default="", help="the study's name (default GRAPH-sweep); an existing one resumes")
    p.add_argument("--seed", type=int, help="the sampler's seed")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default auto)")
    p.add_argument("--db", help="run store URL, which holds the study too (default: $TORCH_STUDIO_DB or the "
                   "user data directory)")
    p.add_argument("--json", action="store_true", help="print the study as one JSON object")
    p.set_defaults(func=cmd_sweep)


def cmd_sweep(args: argparse.Namespace) -> int:
    from graph_editor.model import GraphFileError
    from trainer.store.runs import StoreError
    from trainer.sweep import Sweep, SweepPlan

    plan = SweepPlan(graph=args.graph, space=args.space, trials=args.trials, data=args.data, parallel=args.parallel,
                     epochs=args.epochs, prune=args.prune, budget_bytes=args.budget, study=args.study, db=args.db,
                     metric=args.metric, seed=args.seed, device=args.device)
    try:
        sweep = Sweep(plan, log=lambda line: print(line, file=sys.stderr, flush=True))
    except (ValueError, GraphFileError, StoreError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    stopped: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        print("\nstopping the sweep: its trials stop and will run again on resume", file=sys.stderr, flush=True)
        stopped.append(signum)
        sweep.stop()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        result = sweep.run()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print_result(result)
    return 128 + stopped[0] if stopped else 0     # a shell's convention for a command a signal ended


def print_result(result: dict[str, Any]) -> None:
    print(f"study {result['study']}: {len(result['trials'])} trial(s), {result['metric']} ({result['direction']})")
    for t in result["trials"]:
        value = "" if t["value"] is None else f"{t['value']:.4f}"
        run = "-" if t["run_id"] is None else str(t["run_id"])
        params = ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in t["params"].items())
        print(f"  #{t['number']:<3} {t['state']:<9} {value:>8}  run {run:>4}  {params}"
              + (f"\n        {t['reason']}" if t["reason"] else ""))
    best = result["best"]
    if best:
        print(f"best: trial {best['number']} (run {best['run_id']}) {result['metric']} {best['value']:.4f}")
