"""Sharded checkpoints under torchrun: ``torch.distributed.checkpoint`` (DCP) into a folder, every
rank writing its own shard of the state (FSDP2's DTensor shards; DDP's replicated tensors split
among the ranks by DCP), with the guarantees of :mod:`trainer.checkpoints.single_file`.

``<kind>-<step>.dcp/`` holds safetensors shard files (DCP's ``HuggingFaceStorageWriter``: tensors
and their offsets only; reading back unpickles nothing) and ``manifest.json``: the checkpoint's
metadata (step, epoch, optimizer groups, the spec...) and a SHA-256 of every shard file. The folder
is written under a temporary name, the manifest last, flushed, then renamed by rank 0: a reader
finds the whole checkpoint or none, and :func:`verify_sharded` proves the files are the ones the
manifest names. The tensors use the single-file checkpoint's names (``model.*``, ``optim.*``,
``rng.*``, ``loop.*``), so :func:`load_full` gathers any sharded checkpoint to the state a
one-process run (or an exporter) loads, and :func:`load_sharded` reads it into another number of
ranks, each reading only its shard.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import warnings
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.metadata import TensorStorageMetadata

from ..checkpoints.common import META_VERSION, SHARDED_SUFFIX, CheckpointError, _fsync_dir, fault_point

MANIFEST = "manifest.json"
SUFFIX = SHARDED_SUFFIX


def checkpoint_dir(folder: Path, kind: str, step: int) -> Path:
    return folder / f"{kind}-{step:08d}{SUFFIX}"


def temporary_dir(path: Path) -> Path:
    """Where a sharded checkpoint is written before its rename."""
    return path.with_name(f".{path.name}.tmp")


def save_sharded(path: Path, tensors: dict[str, torch.Tensor], meta: dict[str, Any], *, rank: int,
                 group: Any = None) -> Path:
    """Every rank calls this (a collective): each writes its shard; rank 0 then writes the manifest
    and renames the folder to ``path``. Returns ``path`` once every rank's shard is in it."""
    tmp = temporary_dir(path)
    if rank == 0:
        shutil.rmtree(tmp, ignore_errors=True)   # a killed save's leftovers
        tmp.mkdir(parents=True)
    dist.barrier(group=group)
    try:
        # safetensors writes a tensor's storage as it lies: channels_last weights (and their optimizer
        # moments) are packed first; a copy only of the tensors that are not contiguous
        packed = {k: v if v.is_contiguous() else v.contiguous() for k, v in tensors.items()}
        dcp.save(packed, storage_writer=dcp.HuggingFaceStorageWriter(str(tmp), save_distributed=True))
    except BaseException:
        if rank == 0:    # DCP raised on every rank (its CheckpointException gathers them): nothing to keep
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    dist.barrier(group=group)
    if rank == 0:
        try:
            files = {f.name: _sha256(f) for f in sorted(tmp.iterdir()) if f.is_file()}
            manifest = {"meta_version": META_VERSION, "format": "dcp", **meta, "files": files,
                        "world_size": dist.get_world_size()}
            _write_synced(tmp / MANIFEST, json.dumps(manifest))
            _fsync_dir(tmp)
            fault_point("written", None)
            os.replace(tmp, path)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        _fsync_dir(path.parent)
    dist.barrier(group=group)
    return path


def _write_synced(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def verify_sharded(path: Path | str, *, step: int | None = None) -> dict[str, Any]:
    """The manifest of a whole sharded checkpoint: it reads, every shard file it names is there with
    its checksum, no other shard is there, and (given ``step``) it is that step's. Raises CheckpointError."""
    p = Path(path)
    try:
        meta = json.loads((p / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{p}: no {MANIFEST} (a save that did not finish)") from None
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{p}: its {MANIFEST} cannot be read ({exc})") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("files"), dict) or meta.get("format") != "dcp":
        raise CheckpointError(f"{p}: its {MANIFEST} is not a sharded checkpoint's")
    present = {f.name for f in p.iterdir() if f.is_file() and f.name != MANIFEST}
    if present != set(meta["files"]):
        raise CheckpointError(f"{p}: holds shard files {sorted(present)}, its manifest names "
                              f"{sorted(meta['files'])}")
    for name, digest in meta["files"].items():
        if _sha256(p / name) != digest:
            raise CheckpointError(f"{p}: shard {name} does not match its checksum (the file is damaged)")
    if step is not None and meta.get("step") != step:
        raise CheckpointError(f"{p}: holds step {meta.get('step')}, its record says step {step} (a torn save)")
    return meta


def _layout(path: Path) -> dict[str, tuple[torch.Size, torch.dtype]]:
    reader = dcp.HuggingFaceStorageReader(str(path))
    layout = {}
    for k, m in reader.read_metadata().state_dict_metadata.items():
        if not isinstance(m, TensorStorageMetadata):   # safetensors shards hold tensors only
            raise CheckpointError(f"{path}: entry '{k}' is not a tensor ({type(m).__name__})")
        layout[k] = (m.size, m.properties.dtype)
    return layout


def load_full(path: Path | str, *, step: int | None = None,
              prefix: str = "") -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """The whole state (every shard gathered, plain CPU tensors; the keys starting with ``prefix``)
    and the metadata, in this one process: what a one-process run resumes from and exporters load."""
    p = Path(path)
    meta = verify_sharded(p, step=step)
    target = {k: torch.empty(size, dtype=dtype) for k, (size, dtype) in _layout(p).items() if k.startswith(prefix)}
    try:
        with warnings.catch_warnings():    # "assuming the intent is to load in a single process": it is
            warnings.simplefilter("ignore", UserWarning)
            dcp.load(target, storage_reader=dcp.HuggingFaceStorageReader(str(p)), no_dist=True)
    except Exception as exc:  # noqa: BLE001 - any failure to read is a checkpoint that cannot be used
        raise CheckpointError(f"{p}: its shards cannot be read ({type(exc).__name__}: {exc})") from None
    return target, meta


def load_sharded(path: Path, like: dict[str, torch.Tensor], *, prefix: str = "") -> dict[str, torch.Tensor]:
    """The state read into this run's layout (a collective): keys whose ``like`` tensor is a DTensor
    come back as DTensors of its mesh and placements, each rank reading only its shard; the rest whole."""
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor import empty as dtensor_empty

    target: dict[str, torch.Tensor] = {}
    for key, (size, dtype) in _layout(path).items():
        if not key.startswith(prefix):
            continue
        ref = like.get(key)
        if isinstance(ref, DTensor) and tuple(ref.shape) == tuple(size):
            target[key] = dtensor_empty(size, dtype=dtype, device_mesh=ref.device_mesh, placements=ref.placements)
        else:
            device = ref.device if isinstance(ref, torch.Tensor) and not isinstance(ref, DTensor) else "cpu"
            target[key] = torch.empty(size, dtype=dtype, device=device)
    dcp.load(target, storage_reader=dcp.HuggingFaceStorageReader(str(path)))
    return target


def to_layout(tensors: dict[str, torch.Tensor], like: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Whole tensors (a one-process checkpoint) sharded as this run's ``like`` DTensors are."""
    from torch.distributed.tensor import DTensor, distribute_tensor

    out = dict(tensors)
    for key, value in tensors.items():
        ref = like.get(key)
        if isinstance(ref, DTensor) and not isinstance(value, DTensor) and tuple(ref.shape) == tuple(value.shape):
            out[key] = distribute_tensor(value.to(ref.device), ref.device_mesh, ref.placements)
    return out


def remove(path: Path) -> None:
    """Delete a checkpoint: a file, or a sharded checkpoint's folder."""
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
