"""Data parallelism on PyTorch's own engine: torchrun, DistributedDataParallel and FSDP2.

A spec whose ``distributed.strategy`` is ``ddp`` or ``fsdp2`` runs as ``nproc_per_node x nnodes``
ranks started by ``torch.distributed.run`` (torchrun's own parser and elastic agent, in the worker's
process: :func:`launch`). ``python -m trainer run SPEC`` is either

* the **launcher** (no torchrun variables in its environment): it checks the spec, creates the run
  in the store, starts the ranks through torchrun with the same command plus ``--run-id``, waits, and
  when a rank fails it ends the run ``failed`` naming that rank and its reason (torchrun stops the
  others: nothing is left running); or
* a **rank** (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` set by torchrun, whoever started it):
  :mod:`trainer.distributed.rank`. Started by ``torchrun`` directly, rank 0 creates the run itself.

This module holds what both need: the process group and its :class:`Context`, the per-step
agreement of all ranks on rank 0's decisions, the metric all-reduce, and the model's wrapping
(``DistributedDataParallel``, or ``fully_shard`` per unit and the root).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import torch
import torch.distributed as dist
from torch import nn

from graph_editor.model import Graph
from graph_editor.model.hierarchy import children

from ..memory.recomputation import resolve_segments
from ..spec import DistributedSpec
from .lifeline import CHILD_ENV, RANKS_DIR

CONTROL_TIMEOUT = timedelta(hours=24)  # the flags' group waits out a long pause of rank 0


def resolve_backend(backend: str, device: torch.device) -> str:
    """``auto``: nccl on CUDA devices, gloo on the CPU."""
    if backend == "auto":
        return "nccl" if device.type == "cuda" else "gloo"
    return backend


# ------------------------------------------------------------------ the process group
@dataclass
class Context:
    """This rank's place in the run."""

    rank: int
    world: int
    local_rank: int
    strategy: str
    backend: str
    device: torch.device
    control: Any = None    # a gloo group for rank 0's flags: CPU tensors, no device sync

    @property
    def main(self) -> bool:
        return self.rank == 0

    def describe(self) -> dict[str, Any]:
        return {"strategy": self.strategy, "world_size": self.world, "backend": self.backend}


def init(spec: DistributedSpec, device: torch.device, env: Mapping[str, str] = os.environ) -> Context:
    """Join the process group torchrun set up (``env://``); each rank takes GPU ``LOCAL_RANK`` on CUDA."""
    rank, world, local = (int(env[k]) for k in CHILD_ENV)
    backend = resolve_backend(spec.backend, device)
    if backend == "nccl" and device.type != "cuda":
        raise RuntimeError("distributed.backend: nccl needs CUDA devices; this rank has none (use gloo)")
    if device.type == "cuda":
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    dist.init_process_group(backend, device_id=device if backend == "nccl" else None)
    control = dist.new_group(backend="gloo", timeout=CONTROL_TIMEOUT)
    return Context(rank, world, local, spec.strategy, backend, device, control)


def close() -> None:
    """Destroy every process group of this rank and so end their gloo threads, while the interpreter is
    whole. The caller has dropped what it held of them (the context, the wrapped model); the job's
    reference cycles go first, or the groups would live on, their threads with them, into the teardown."""
    gc.collect()
    if dist.is_initialized():
        dist.destroy_process_group()


def agree(ctx: Context, stop: bool, due: bool) -> tuple[bool, bool]:
    """Rank 0's (stop, read-metrics-now) for every rank: the ranks stop and read their metrics (a
    collective) at the same step. One 2-byte gloo broadcast of CPU tensors a step: no device sync."""
    flags = torch.tensor([stop, due], dtype=torch.uint8)
    dist.broadcast(flags, src=0, group=ctx.control)
    return bool(flags[0]), bool(flags[1])


def share(ctx: Context, value: Any) -> Any:
    """Rank 0's ``value`` (plain data: a run id, a path) on every rank."""
    box = [value if ctx.main else None]
    dist.broadcast_object_list(box, src=0, group=ctx.control)
    return box[0]


def window_reduce(ctx: Context) -> Callable[[torch.Tensor], torch.Tensor]:
    """For :class:`~trainer.loop.Window`: every rank's [losses; correct counts] made global, at the
    window's own sync point: losses averaged (equal per-rank batches), correct counts summed."""
    def reduce(stacked: torch.Tensor) -> torch.Tensor:
        dist.all_reduce(stacked)
        stacked[0] /= ctx.world
        return stacked
    return reduce


# ------------------------------------------------------------------ wrapping the model
def fsdp_units(graph: Graph, model: nn.Module, entries: Sequence[str]) -> list[list[str]]:
    """The module names (graph node ids) of each ``fully_shard`` unit: the entries (node ids, group
    ids, 'first..last' ranges), or with none every top-level group; units without parameters are
    dropped. Raises SegmentError naming the entry."""
    fx_graph = getattr(model, "graph", None)     # a GraphModule's, in the order it calls its nodes
    order = [n.target for n in fx_graph.nodes if n.op == "call_module"] if fx_graph is not None else \
        [name for name, _ in model.named_children()]
    if not entries:
        entries = children(graph.groups, None)
    position = set(order)
    plain = [e for e in entries if e in position and e not in graph.groups]
    grouped = [e for e in entries if e not in plain]
    units = [[e] for e in plain] + resolve_segments(graph, order, grouped, "distributed.fsdp_units")
    owned = dict(model.named_children())
    return [u for u in units if any(p.requires_grad for n in u for p in owned[n].parameters())]


def shard_fsdp2(model: nn.Module, graph: Graph, spec: DistributedSpec, ctx: Context) -> nn.Module:
    """``fully_shard`` each unit, then the root (what no unit holds), in place; returns the model."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(ctx.device.type, (ctx.world,))
    # FSDP2 shards a parameter's storage along dim 0 and refuses other layouts ("FSDP does not support
    # non-contiguous parameters"): a channels_last convnet's weights go back to the contiguous layout.
    # The batches stay channels_last, and a convolution of a channels_last input runs channels_last.
    model.to(memory_format=torch.contiguous_format)
    owned = dict(model.named_children())
    for unit in fsdp_units(graph, model, spec.fsdp_units):
        modules = [owned[n] for n in unit]
        fully_shard(modules if len(modules) > 1 else modules[0], mesh=mesh,
                    reshard_after_forward=spec.reshard_after_forward)
    fully_shard(model, mesh=mesh, reshard_after_forward=spec.reshard_after_forward)
    if fsdp_sums_gradients(mesh, ctx):
        for m in model.modules():      # pytorch#162338: gloo's reduce-scatter summed: divide by the world
            divide = getattr(m, "set_gradient_divide_factor", None)    # FSDP2's units only
            if divide is not None:
                divide(float(ctx.world))
    return model


def fsdp_sums_gradients(mesh: Any, ctx: Context) -> bool:
    """Whether FSDP2 here reduces gradients by SUM instead of AVG (pytorch#162338 with gloo): a probe
    of one sharded parameter whose every rank's gradient is 1; the mean is 1, the sum is the world."""
    from torch.distributed.fsdp import fully_shard

    if ctx.world == 1:
        return False
    probe = nn.Linear(ctx.world, 1, bias=False, device=ctx.device)
    nn.init.ones_(probe.weight)
    fully_shard(probe, mesh=mesh)
    probe(torch.ones(1, ctx.world, device=ctx.device)).sum().backward()
    grad = cast(Any, probe.weight.grad).full_tensor()     # a DTensor: its shards gathered
    return bool(torch.allclose(grad, torch.full_like(grad, float(ctx.world))))


def wrap_ddp(model: nn.Module, ctx: Context) -> nn.Module:
    """The model under DistributedDataParallel: gradients all-reduced (averaged) in buckets during
    backward, overlapping it."""
    ids = [ctx.device.index] if ctx.device.type == "cuda" else None
    return nn.parallel.DistributedDataParallel(model, device_ids=ids)


# ------------------------------------------------------------------ the launcher's torchrun
def torchrun_args(spec: DistributedSpec, log_dir: Path | None = None) -> list[str]:
    """torchrun's options for the spec; one node meets on a free local port (as ``--standalone`` does)."""
    args = [f"--nproc-per-node={spec.nproc_per_node}", "--max-restarts=0", "--monitor-interval=0.1"]
    if spec.nnodes == 1:   # what torchrun's --standalone means: a rendezvous on a free local port
        args += ["--rdzv-backend=c10d", "--rdzv-endpoint=localhost:0", f"--rdzv-id={uuid.uuid4().hex}"]
    else:
        args += [f"--nnodes={spec.nnodes}", f"--node-rank={spec.node_rank}", "--rdzv-backend=c10d",
                 f"--rdzv-endpoint={spec.rdzv_endpoint}", f"--rdzv-id={spec.rdzv_id}"]
    if log_dir is not None:   # each rank's stderr also kept in a file: the last words of a rank that crashed
        args += [f"--log-dir={log_dir}", "--tee=2"]
    return args


@dataclass
class RankFailure:
    """Why the run failed: the first rank that failed, and its reason."""

    rank: int
    kind: str
    message: str
    step: int | None = None
    traceback: str = ""


def launch(spec: DistributedSpec, module_args: list[str], log_dir: Path) -> list[Any] | None:
    """Run ``python -m <module_args>`` as the spec's ranks through torchrun's parser and elastic agent;
    None when every rank exited 0, else torchrun's per-rank failures (``ProcessFailure``, rank set)."""
    from torch.distributed import run as torchrun
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    _threads_per_rank(spec.nproc_per_node)
    args = torchrun.parse_args([*torchrun_args(spec, log_dir), "-m", *module_args])
    config, cmd, cmd_args = torchrun.config_from_args(args)
    from torch.distributed.launcher.api import elastic_launch

    try:
        elastic_launch(config, cmd)(*cmd_args)
    except ChildFailedError as exc:
        out = []
        for rank, failure in sorted(exc.failures.items()):
            cast(Any, failure).rank = rank     # ProcessFailure knows its local rank only
            out.append(failure)
        return out
    return None


def _threads_per_rank(nproc: int) -> None:
    """Ranks share this machine's cores: each gets its share of the threads the worker would take
    (a user's own OMP_NUM_THREADS or TORCH_STUDIO_THREADS is kept)."""
    from ..threads import SWITCH, THREAD_VARIABLES, usable_cores

    cores = usable_cores()
    if SWITCH not in os.environ and os.environ.get("OMP_NUM_THREADS") == str(cores):
        for variable in THREAD_VARIABLES:
            os.environ[variable] = str(max(1, cores // nproc))


def failure_file(run_dir: Path, rank: int) -> Path:
    return run_dir / RANKS_DIR / f"failure-{rank}.json"


def write_failure(run_dir: Path, rank: int, kind: str, message: str, *, step: int | None, tb: str = "",
                  peer: bool = False) -> None:
    """A rank's own account of its failure, for the launcher (``peer``: it failed because another did)."""
    path = failure_file(run_dir, rank)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"rank": rank, "kind": kind, "message": message, "step": step, "traceback": tb, "peer": peer,
              "time": time.time()}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record), encoding="utf-8")
    os.replace(tmp, path)


def root_cause(failures: list[Any], run_dir: Path) -> RankFailure:
    """The rank whose failure ended the run. A rank that died without a word (a signal, a crash) comes
    first; then one that failed on its own (not because a peer went away), earliest first; then the
    earliest. The others failed because it did."""
    records: dict[int, dict[str, Any]] = {}
    for f in failures:
        with contextlib.suppress(OSError, ValueError):
            records[f.rank] = json.loads(failure_file(run_dir, f.rank).read_text(encoding="utf-8"))
    silent = [f for f in failures if f.rank not in records]
    if silent:
        f = min(silent, key=lambda f: f.rank)
        how = f"killed by {f.signal_name()}" if f.exitcode < 0 else f"exited with status {f.exitcode}"
        tail = stderr_tail(f)
        last = f": {tail[-1]}" if tail else ""
        return RankFailure(f.rank, "error", f"rank {f.rank} (pid {f.pid}) {how}{last}", None, "\n".join(tail))
    own = [r for r in records.values() if not r.get("peer")] or list(records.values())
    r = min(own, key=lambda r: (r["time"], r["rank"]))
    return RankFailure(r["rank"], r["kind"], f"rank {r['rank']}: {r['message']}", r.get("step"),
                       r.get("traceback", ""))


def stderr_tail(failure: Any, lines: int = 20, limit: int = 16384) -> list[str]:
    """The last lines a failed rank wrote on stderr (torchrun keeps them beside its ``error_file``;
    torchrun's own "[rankN]:" prefixes removed), or none where there is no such file."""
    error_file = getattr(failure, "error_file", "") or ""
    if not error_file:
        return []
    try:
        with open(Path(error_file).parent / "stderr.log", "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - limit))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return []
    out = [line.split("]:", 1)[1].strip() if line.startswith("[rank") and "]:" in line else line.strip()
           for line in text.splitlines()]
    return [line for line in out if line][-lines:]


def extra_ranks_note(failures: list[Any], cause: RankFailure) -> str:
    others = sorted(f.rank for f in failures if f.rank != cause.rank)
    return f" (then rank{'s' if len(others) > 1 else ''} {', '.join(map(str, others))} stopped with it)" \
        if others else ""


def is_peer_error(exc: BaseException) -> bool:
    """An error a rank gets because another rank went away (a collective's connection closed)."""
    if isinstance(exc, dist.DistError):
        return True
    text = str(exc).lower()
    return any(s in text for s in ("connection closed by peer", "connection reset", "broken pipe",
                                   "gloo", "nccl", "socket", "timed out"))
