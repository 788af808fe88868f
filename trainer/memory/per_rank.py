"""The predicted memory of one rank (one GPU) of a DDP or FSDP2 run, from one single-process prediction.

Both strategies split the global batch: each of the N ranks runs ``batch / N`` samples, so one
:func:`trainer.memory.prediction.predict_memory` at ``batch / N`` (weights W, gradients G, optimizer
state O, saved activations A, the batch and transient buffers T, all at the peak of a step) is the
ground both formulas stand on:

* **DDP** keeps the whole model on every rank: ``W + G + O + A + T`` at ``batch / N``, plus one more
  copy of the gradients for DDP's all-reduce buckets (``DistributedDataParallel`` copies each
  gradient into a flat bucket unless ``gradient_as_bucket_view``; the trainer uses the default).
* **FSDP2** shards parameters, gradients and optimizer state over the N ranks: ``W/N + G/N + O/N``;
  while a unit runs its parameters are all-gathered, and in its backward its unsharded gradients live
  until the reduce-scatter, so the largest unit adds ``2 x`` its parameter bytes (the root's own
  parameters, those no unit holds, count as a unit); with ``reshard_after_forward`` off every unit
  stays gathered from forward to backward, so the gathered term is the whole model's ``W`` plus the
  largest unit's gradients. ``A + T`` at ``batch / N`` as for DDP.

The dataset, where the loaders keep it on the device (``resident``: part "data"), is held whole by
every rank under both strategies: each rank gathers its rows of every global batch from the whole
split (:mod:`trainer.distributed.data`), so it is not divided by N.

Communication buffers (NCCL's own, a unit prefetched while another runs) are not counted: they
are tens of MiB, within the CUDA slack :func:`trainer.memory.prediction.usable_bytes` leaves.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from graph_editor.building import build_module
from graph_editor.model import Graph

from ..spec import RunSpec
from .doctor import predict_for_spec
from .prediction import MemoryPrediction

STATE = ("weights", "gradients", "optimizer")    # what FSDP2 shards


@dataclass
class RankMemory:
    """One rank's predicted peak under a strategy, and its parts (bytes)."""

    strategy: str
    world: int
    batch: int                     # samples per rank
    peak_bytes: int
    parts: dict[str, int] = field(default_factory=dict)


def unit_bytes(graph: Graph, spec: RunSpec) -> list[int]:
    """Parameter bytes of each FSDP2 unit the trainer would make (``distributed.fsdp_units``, else every
    top-level group) and, last, of the root's own parameters; built on the meta device (no memory)."""
    from ..distributed.parallel import fsdp_units

    model = build_module(graph, device="meta")
    owned = dict(model.named_children())
    units = fsdp_units(graph, model, spec.distributed.fsdp_units)
    sizes, held = [], set()
    for unit in units:
        params = [p for name in unit for p in owned[name].parameters()]
        held |= {id(p) for p in params}
        sizes.append(sum(p.numel() * p.element_size() for p in params))
    sizes.append(sum(p.numel() * p.element_size() for p in model.parameters() if id(p) not in held))
    return sizes


def per_rank(graph: Graph, spec: RunSpec, world: int, *, device: str = "cuda",
             prediction: MemoryPrediction | None = None, resident: int = 0) -> dict[str, RankMemory]:
    """``{"ddp": ..., "fsdp2": ...}``: one rank's predicted peak for ``world`` ranks sharing the spec's
    batch (which must divide by ``world``). ``prediction``: the one at ``batch / world``, if made;
    ``resident``: the dataset's bytes on the device (every rank holds it whole).

    The parts keep the single-process names where they are the same thing (FSDP2's "weights",
    "gradients" and "optimizer" are each one rank's shard); DDP adds "ddp buckets", FSDP2 "gathered
    unit"."""
    if world < 1 or spec.train.batch_size % world:
        raise ValueError(f"train.batch_size: the global batch {spec.train.batch_size} must divide evenly among "
                         f"{world} processes")
    batch = spec.train.batch_size // world
    pred = prediction or predict_for_spec(graph, spec, device=device, batch=batch, resident=resident)
    p = pred.parts
    step = {k: v for k, v in p.items() if k not in STATE}     # data, activations, the batch, transient buffers
    ddp = {**p, "ddp buckets": p["weights"]}                   # one gradient per weight, in the buckets
    largest = max(unit_bytes(graph, spec))
    gathered = 2 * largest if spec.distributed.reshard_after_forward else p["weights"] + largest
    fsdp = {**{k: -(-p[k] // world) for k in STATE}, "gathered unit": gathered, **step}
    return {"ddp": RankMemory("ddp", world, batch, sum(ddp.values()), ddp),
            "fsdp2": RankMemory("fsdp2", world, batch, sum(fsdp.values()), fsdp)}
