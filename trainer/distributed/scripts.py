"""Launch lines for a distributed run: the ``torchrun`` command of each node and a Slurm script.

A run spec with a ``distributed`` strategy runs as ``python -m trainer run SPEC`` in every process
that PyTorch's own launcher (``torchrun``, i.e. ``torch.distributed.run``) starts; this module only
writes the command lines a user types on each machine, or the ``sbatch`` script a cluster runs. It
starts nothing and imports neither torch nor Qt (the CLI and the Train dialog print what it writes).

Rendezvous is ``c10d``: the process on the endpoint's host serves the rendezvous store and every
node joins it; ``--node-rank`` is written for the reader (c10d assigns the ranks itself, so rank 0,
the one process that writes the store, may land on any node: a team's runs then want a store every
node reaches, a PostgreSQL URL, not a SQLite file on one machine).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ..spec import ENDPOINT_RE, RDZV_ID_RE, RunSpec, SpecError

DEFAULT_PORT = 29500
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1", "")
SLURM_VALUE = re.compile(r"[A-Za-z0-9:,._-]{1,100}")   # a time limit or partition: nothing a shell reads


@dataclass(frozen=True)
class Launch:
    """What the launch lines need: the spec file every node reads, the store URL, the process grid."""

    spec_path: str
    nproc_per_node: int
    nnodes: int = 1
    rdzv_endpoint: str = f"localhost:{DEFAULT_PORT}"
    rdzv_id: str = "torch-studio"
    strategy: str = "ddp"
    gpus: bool = True          # one GPU per process (nccl); False: CPU processes (gloo)
    db: str = ""               # empty: the worker's default ($TORCH_STUDIO_DB or the user data dir)
    run_dir: str = ""          # empty: the worker's default (beside the store)
    name: str = "torch-studio"

    def __post_init__(self) -> None:
        problems = []
        if self.nproc_per_node < 1:
            problems.append(f"distributed.nproc_per_node: must be at least 1, got {self.nproc_per_node}")
        if self.nnodes < 1:
            problems.append(f"distributed.nnodes: must be at least 1, got {self.nnodes}")
        if self.strategy not in ("ddp", "fsdp2"):
            problems.append(f"distributed.strategy: '{self.strategy}' runs in one process; launch lines are for "
                            f"ddp or fsdp2 (one process: python -m trainer run SPEC)")
        try:
            split_endpoint(self.rdzv_endpoint)
        except ValueError as exc:
            problems.append(f"distributed.rdzv_endpoint: {exc}")
        if not RDZV_ID_RE.fullmatch(self.rdzv_id):
            problems.append(f"distributed.rdzv_id: 1 to 128 letters, digits, '.', '_' or '-', got {self.rdzv_id!r}")
        if problems:
            raise SpecError(problems)

    @property
    def world_size(self) -> int:
        return self.nproc_per_node * self.nnodes

    def worker_args(self) -> list[str]:
        """What each process runs after ``torchrun``'s own options: the worker module and its arguments.
        A store URL with a password is left out (:func:`notes` says to export ``TORCH_STUDIO_DB``): a
        printed or copied line, a Slurm script and ``ps`` on every node would show it."""
        args = ["-m", "trainer", "run", self.spec_path]
        if self.db and not has_password(self.db):
            args += ["--db", self.db]
        if self.run_dir:
            args += ["--run-dir", self.run_dir]
        return args


def has_password(url: str) -> bool:
    """Whether a store URL (``dialect+driver://user:password@host/db``) carries a password."""
    netloc = urlsplit(url).netloc if "://" in url else ""
    return ":" in netloc.rpartition("@")[0]


def slug(name: str) -> str:
    """A name as a file or job name: letters, digits, '_' and '.', each other run of characters one '-'."""
    return re.sub(r"[^A-Za-z0-9_.]+", "-", name).strip("-")[:64]


def split_endpoint(endpoint: str) -> tuple[str, int]:
    """``host:port`` (or ``[v6addr]:port``) as (host, port), by the run spec's own rule."""
    m = ENDPOINT_RE.fullmatch(endpoint)
    if m is None or not 0 < int(m.group(2)) < 65536:
        raise ValueError(f"must be host:port with a port 1..65535, got {endpoint!r}")
    return m.group(1).strip("[]"), int(m.group(2))


def launch_from_spec(spec: RunSpec, spec_path: str | Path, *, db: str = "", run_dir: str = "") -> Launch:
    """The :class:`Launch` of a loaded spec's ``distributed`` section; the spec's path made absolute
    (every node reads it; on several machines it must be on a folder they share)."""
    d = spec.distributed
    gpus = d.backend == "nccl" or d.backend == "auto" and spec.device != "cpu"
    return Launch(spec_path=str(Path(spec_path).expanduser().resolve()), nproc_per_node=d.nproc_per_node,
                  nnodes=d.nnodes, rdzv_endpoint=d.rdzv_endpoint, rdzv_id=d.rdzv_id, strategy=d.strategy,
                  gpus=gpus, db=db, run_dir=run_dir, name=spec.name or "torch-studio")


def torchrun_argv(launch: Launch, node_rank: int) -> list[str]:
    """The ``torchrun`` command of node ``node_rank`` as an argument list."""
    if not 0 <= node_rank < launch.nnodes:
        raise ValueError(f"node_rank: must be 0 to {launch.nnodes - 1}, got {node_rank}")
    return ["torchrun", f"--nnodes={launch.nnodes}", f"--nproc-per-node={launch.nproc_per_node}",
            f"--node-rank={node_rank}", "--rdzv-backend=c10d", f"--rdzv-endpoint={launch.rdzv_endpoint}",
            f"--rdzv-id={launch.rdzv_id}", *launch.worker_args()]


def torchrun_line(launch: Launch, node_rank: int) -> str:
    """The ``torchrun`` command of one node, quoted for a POSIX shell."""
    return shlex.join(torchrun_argv(launch, node_rank))


def notes(launch: Launch) -> list[str]:
    """What the user must see to before launching (each one line, for the CLI's comments and the dialog)."""
    out = []
    if has_password(launch.db):
        out.append("the run store URL holds a password, so the lines leave --db out: on every node, export "
                   "TORCH_STUDIO_DB set to that URL (the worker's default store) before torchrun or sbatch")
    host, _ = split_endpoint(launch.rdzv_endpoint)
    if launch.nnodes > 1:
        if host in LOCAL_HOSTS:
            out.append(f"distributed.rdzv_endpoint is {launch.rdzv_endpoint}: only this machine reaches it; "
                       "name the first node's address so that the other nodes can join")
        out.append("every node must read the spec file, the graph and the data at the same paths "
                   "(a shared folder)")
        if not launch.db.startswith("postgresql"):
            out.append("rank 0 writes the run store on whichever node it lands; give every node one store "
                       "with --db postgresql://... to keep the team's runs in one place")
    return out


def commands_text(launch: Launch) -> str:
    """Every node's ``torchrun`` line under a comment naming the node, with the notes first."""
    lines = [f"# {launch.name}: {launch.strategy} over {launch.world_size} processes "
             f"({launch.nnodes} node(s) x {launch.nproc_per_node})"]
    lines += [f"# note: {n}" for n in notes(launch)]
    for rank in range(launch.nnodes):
        where = " (the rendezvous host)" if rank == 0 and launch.nnodes > 1 else ""
        lines += [f"# node {rank}{where}:", torchrun_line(launch, rank)]
    return "\n".join(lines) + "\n"


def sbatch_script(launch: Launch, *, time_limit: str = "", partition: str = "") -> str:
    """A Slurm batch script: one task per node, each running ``torchrun`` with the allocation's first
    node as the rendezvous host (``scontrol show hostnames``), one GPU per process on GPU runs."""
    for what, value in (("time limit", time_limit), ("partition", partition)):
        if value and not SLURM_VALUE.fullmatch(value):
            raise ValueError(f"Slurm {what}: letters, digits and ':,._-' only, got {value!r}")
    _, port = split_endpoint(launch.rdzv_endpoint)
    job = slug(launch.name) or "torch-studio"
    head = ["#!/bin/bash", f"#SBATCH --job-name={job}", f"#SBATCH --nodes={launch.nnodes}",
            "#SBATCH --ntasks-per-node=1"]
    if launch.gpus:
        head.append(f"#SBATCH --gpus-per-node={launch.nproc_per_node}")
    if time_limit:
        head.append(f"#SBATCH --time={time_limit}")
    if partition:
        head.append(f"#SBATCH --partition={partition}")
    head.append(f"#SBATCH --output={job}-%j.out")
    torchrun = ["torchrun", '--nnodes="$SLURM_NNODES"', f"--nproc-per-node={launch.nproc_per_node}",
                "--rdzv-backend=c10d", f'--rdzv-endpoint="$head_node:{port}"',
                f'--rdzv-id="{launch.rdzv_id}-$SLURM_JOB_ID"', shlex.join(launch.worker_args())]
    body = ["", "# Written by torch-studio launch --slurm from a run spec; submit it with sbatch.",
            f"# {launch.strategy} over {launch.world_size} processes ({launch.nnodes} node(s) x "
            f"{launch.nproc_per_node}).",
            *(f"# note: {n}" for n in notes(launch)),
            "# Activate the Python environment that has torch-studio installed before this line runs,",
            "# in this script or in the shell that calls sbatch (Slurm passes its environment on).",
            "set -euo pipefail",
            "",
            "# The allocation's first node serves the c10d rendezvous; every node's torchrun joins it and",
            "# c10d numbers the nodes, so no --node-rank is needed. (sed reads every name: `head -n 1`",
            "# could end the pipe while scontrol still writes, and pipefail would end the job on its SIGPIPE.)",
            'head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed -n 1p)',
            "",
            "srun --ntasks-per-node=1 " + " \\\n    ".join(torchrun)]
    return "\n".join(head + body) + "\n"
