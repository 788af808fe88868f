"""``torch-studio launch SPEC [--slurm]``: print how to start a distributed run spec.

Prints each node's ``torchrun`` line (or, with ``--slurm``, an ``sbatch`` script) written by
:mod:`trainer.distributed.scripts` from the spec's ``distributed`` section. It starts nothing.
"""

from __future__ import annotations

import argparse
import sys

from trainer.distributed.scripts import commands_text, launch_from_spec, sbatch_script
from trainer.spec import SpecError, load_spec


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("launch", help="print the torchrun line of each node (or a Slurm script) for a "
                                      "distributed run spec")
    p.add_argument("spec", help="a run spec (JSON) with a distributed section (strategy ddp or fsdp2)")
    p.add_argument("--slurm", action="store_true", help="print an sbatch script instead of torchrun lines")
    p.add_argument("--db", default="", help="run store URL every rank 0 writes (a team: postgresql://...)")
    p.add_argument("--run-dir", default="", help="folder for the run's checkpoints (shared by every node)")
    p.add_argument("--time", default="", help="Slurm: the job's time limit (e.g. 04:00:00)")
    p.add_argument("--partition", default="", help="Slurm: the partition to submit to")
    p.set_defaults(func=cmd_launch)


def cmd_launch(args: argparse.Namespace) -> int:
    try:
        spec = load_spec(args.spec)
        launch = launch_from_spec(spec, args.spec, db=args.db, run_dir=args.run_dir)
    except SpecError as exc:
        print(f"torch-studio launch: {args.spec}: {exc}", file=sys.stderr)
        return 2
    if args.slurm:
        try:
            text = sbatch_script(launch, time_limit=args.time, partition=args.partition)
        except ValueError as exc:
            print(f"torch-studio launch: {exc}", file=sys.stderr)
            return 2
        sys.stdout.write(text)
    else:
        sys.stdout.write(commands_text(launch))
    return 0
