"""Checkpoints: one safetensors file per save, its metadata in the file's own header. Nothing is unpickled.

``<kind>-<step>.safetensors`` holds ``model.*`` (the state dict), ``optim.<param index>.<key>``
(optimizer state), ``rng.*`` (generator states as uint8 tensors) and ``loop.*`` (the epoch's shuffled
order and the device-side accumulators of an epoch stopped midway). The header's metadata
(``torch_studio``, JSON) holds the step, epoch, the kinds the file serves as, optimizer param groups,
schedule state, the spec and a SHA-256 of every tensor's bytes. A save that is both the best and the
last is written once: ``best-N`` and ``last-N`` are one file, hard-linked (or copied; :func:`link_checkpoint`).

One file is one atomic unit: it is written under a temporary name, flushed to disk and renamed, so
a reader finds either the whole new checkpoint or none of it; the tensors can never belong to another
step than the metadata beside them. :func:`verify_checkpoint` proves a file whole (readable, its
checksum, the step its store row expects) before a run resumes from it or an exporter loads it;
a file that fails raises :class:`CheckpointError` naming the file and what is wrong with it.
Saves keep the newest :data:`KEEP` files of each kind, so a resume can fall back to the previous
good one.

Checkpoints written before this format (version 1: ``NAME.safetensors`` with a ``NAME.json``
sidecar) are still read.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from .common import (  # noqa: F401  (public here too: trainer.checkpoints.single_file.CheckpointError, ...)
    FAULT_ENV,
    FAULT_POINTS,
    META_KEY,
    META_VERSION,
    CheckpointError,
    _fsync_dir,
    fault_point,
)

KEEP = 2                                   # files kept per kind: the newest and the one before it
_NAME = re.compile(r"^(?P<kind>[a-z]+)-(?P<step>\d+)\.(safetensors|dcp)$")   # .dcp: a sharded checkpoint's folder


def checkpoint_file(folder: Path, kind: str, step: int) -> Path:
    """Where the ``kind`` checkpoint of ``step`` lives: one file per save."""
    return folder / f"{kind}-{step:08d}.safetensors"


def save_checkpoint(path: Path, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> Path:
    """Write ``path`` as one atomic unit: tensors and metadata (with a checksum) in one file, written
    under a temporary name, flushed to disk, then renamed. Returns ``path``."""
    return write_checkpoint(path, snapshot(tensors), meta)


def snapshot(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The tensors as contiguous CPU copies of their own (one copy each, whatever their layout): what a
    checkpoint written later, on another thread, holds, however the run's next steps change the originals."""
    return {k: v.detach().to("cpu", memory_format=torch.contiguous_format, copy=True) for k, v in tensors.items()}


def write_checkpoint(path: Path, flat: dict[str, torch.Tensor], meta: dict[str, Any]) -> Path:
    """:func:`save_checkpoint` of tensors that are a :func:`snapshot` already (contiguous CPU copies
    nothing changes meanwhile): checksummed, serialised and written here once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    header = {"meta_version": META_VERSION, **meta, "checksum": tensors_checksum(flat)}

    def write(tmp: Path) -> None:
        save_file(flat, str(tmp), metadata={META_KEY: json.dumps(header)})
        _fsync(tmp)                           # the bytes reach the disk before the name does
        fault_point("written", tmp)

    return _publish(path, write)


def _fsync(path: Path) -> None:
    with open(path, "rb+") as f:
        os.fsync(f.fileno())


def _publish(path: Path, make: Callable[[Path], None]) -> Path:
    """``make`` the file under a temporary name, then rename it to ``path``: ``path`` is whole or absent."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        make(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)
    return path


def link_checkpoint(source: Path, path: Path) -> Path:
    """``path`` as the same bytes as the whole checkpoint ``source`` (a checkpoint that is both the best
    and the last is written once): a hard link, or a copy flushed to disk where the file system has no
    links; made under a temporary name and renamed, so ``path`` is whole or absent. Returns ``path``."""

    def link(tmp: Path) -> None:
        try:
            os.link(source, tmp)
        except OSError:                      # no hard links here (FAT, some network file systems)
            shutil.copyfile(source, tmp)
            _fsync(tmp)

    return _publish(path, link)


def tensors_checksum(tensors: dict[str, torch.Tensor]) -> str:
    """SHA-256 over every tensor's name, dtype, shape and bytes, in name order (CPU tensors)."""
    h = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name]
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        if t.numel():
            h.update(t.reshape(-1).view(torch.uint8).numpy().data)
    return h.hexdigest()


def read_checkpoint(path: Path | str) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """All tensors and the metadata of a checkpoint, verified (see :func:`verify_checkpoint`)."""
    return verify_checkpoint(path)


def verify_checkpoint(path: Path | str, *, step: int | None = None,
                      ) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Load a checkpoint and prove it whole: it reads, its checksum matches its tensors and, when
    ``step`` is given (the step its store row records), it is that step's checkpoint.
    Raises :class:`CheckpointError` naming the file and the problem."""
    p = Path(path)
    if p.is_dir():                # written by the ranks of a torchrun run (trainer.distributed.sharded_checkpoints)
        from ..distributed.sharded_checkpoints import load_full

        return load_full(p, step=step)
    if not p.is_file():
        raise CheckpointError(f"{p}: no such checkpoint file")
    tensors, header = _load(p)
    if header is not None:
        meta = _json(p, header)
        expected = meta.get("checksum")
        if expected != tensors_checksum(tensors):
            raise CheckpointError(f"{p}: its tensors do not match their checksum (the file is damaged)")
    else:                                     # version 1: the metadata in a sidecar beside it
        side = p.with_suffix(".json")
        try:
            meta = _json(side, side.read_text(encoding="utf-8"))
        except OSError as exc:
            raise CheckpointError(f"{p}: its metadata file {side.name} cannot be read ({exc.strerror or exc})") \
                from None
    if step is not None and meta.get("step") != step:
        raise CheckpointError(f"{p}: holds step {meta.get('step')}, its record says step {step} "
                              "(a torn save)")
    return tensors, meta


def _load(p: Path) -> tuple[dict[str, torch.Tensor], str | None]:
    try:
        with safe_open(str(p), "pt") as f:
            header = (f.metadata() or {}).get(META_KEY)
            return {k: f.get_tensor(k) for k in f.keys()}, header  # noqa: SIM118 - safe_open has no iterator
    except Exception as exc:  # noqa: BLE001 - SafetensorError, OSError...: the file is not whole
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(f"{p}: not a complete checkpoint, truncated or corrupt ({detail})") from None


def _json(p: Path, text: str) -> dict[str, Any]:
    try:
        meta = json.loads(text)
    except ValueError as exc:
        raise CheckpointError(f"{p}: its metadata is not valid JSON ({exc})") from None
    if not isinstance(meta, dict):
        raise CheckpointError(f"{p}: its metadata is not a JSON object")
    return meta


def load_checkpoint_weights(path: Path | str) -> dict[str, torch.Tensor]:
    """The model's state dict from a verified checkpoint (keys are the graph's node ids): what exporters
    load. Raises :class:`CheckpointError` for a file that is not whole."""
    if Path(path).is_dir():     # a sharded checkpoint: gather only the weights
        from ..distributed.sharded_checkpoints import load_full

        tensors, _ = load_full(path, prefix="model.")
    else:
        tensors, _ = verify_checkpoint(path)
    return {k.removeprefix("model."): v for k, v in tensors.items() if k.startswith("model.")}


def _files(folder: Path, kind: str | None = None) -> list[tuple[int, Path]]:
    """The checkpoint files of ``folder`` (of one kind, or all), oldest step first."""
    return sorted((int(m["step"]), f) for f in folder.glob("*-*.*")
                  if (m := _NAME.match(f.name)) and kind in (None, m["kind"]))


def prune(folder: Path, kind: str, step: int, keep: int = KEEP) -> list[Path]:
    """After saving ``step``: delete all but the newest ``keep`` ``kind`` checkpoints of ``folder`` up to
    that step, and any temporary file a killed save left; returns what was removed. Files of later
    steps are not this save's to judge (a resume discards its own). Saves of one run never overlap."""
    files = [(s, f) for s, f in _files(folder, kind) if s <= step]
    gone = [f for _, f in files[:-keep]] if keep > 0 else [f for _, f in files]
    gone += _temporary(folder)
    for f in gone:
        _remove(f)
    return gone


def discard_after(folder: Path, step: int) -> list[Path]:
    """Delete the checkpoint files of steps after ``step``: a run resumed from ``step`` makes them
    again, and until then nothing records them (a killed save, or records a resume forgot)."""
    gone = [f for s, f in _files(folder) if s > step] + _temporary(folder)
    for f in gone:
        _remove(f)
    return gone


def _temporary(folder: Path) -> list[Path]:
    """What killed saves left: temporary files and sharded checkpoints' temporary folders."""
    return [*folder.glob(".*.safetensors.tmp"), *folder.glob(".*.dcp.tmp")]


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def optimizer_tensors(opt: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Flatten an optimizer state dict: tensors for safetensors, the rest (groups, scalars) for JSON."""
    sd = opt.state_dict()
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, Any] = {}
    for idx, state in sd["state"].items():
        for key, value in state.items():
            if isinstance(value, torch.Tensor):
                tensors[f"optim.{idx}.{key}"] = value
            else:
                scalars[f"{idx}.{key}"] = value
    groups = [{k: _plain(v) for k, v in g.items()} for g in sd["param_groups"]]
    return tensors, {"param_groups": groups, "scalars": scalars}


def load_optimizer(opt: torch.optim.Optimizer, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
    """Restore what :func:`optimizer_tensors` flattened; tensor-valued lrs stay tensors."""
    state: dict[int, dict[str, Any]] = {}
    for name, value in tensors.items():
        if name.startswith("optim."):
            _, idx, key = name.split(".", 2)
            state.setdefault(int(idx), {})[key] = value
    for name, value in meta["scalars"].items():
        idx, key = name.split(".", 1)
        state.setdefault(int(idx), {})[key] = value
    groups = []
    for saved, current in zip(meta["param_groups"], opt.param_groups, strict=True):
        g = dict(saved)
        for k, v in current.items():
            if isinstance(v, torch.Tensor) and k in g:
                g[k] = torch.tensor(g[k], dtype=v.dtype, device=v.device)
        if isinstance(g.get("betas"), list):
            g["betas"] = tuple(g["betas"])
        groups.append(g)
    opt.load_state_dict({"state": state, "param_groups": groups})
    match_param_layouts(opt)


def match_param_layouts(opt: torch.optim.Optimizer) -> None:
    """Give each per-parameter state tensor (moments, momentum) its parameter's strides. A checkpoint
    stores them contiguous; a channels_last convnet's weights are not, and the fused CUDA kernels refuse
    a state whose layout differs from its parameter's ("params, grads, exp_avgs, and exp_avg_sqs must
    have same dtype, device, and layout"): seen on an H200 resuming an fp16 digits_cnn run."""
    for param, state in opt.state.items():
        if not isinstance(param, torch.Tensor):
            continue
        for key, value in state.items():
            if (isinstance(value, torch.Tensor) and value.shape == param.shape
                    and value.stride() != param.stride()):
                state[key] = torch.empty_like(param, dtype=value.dtype).copy_(value)


def _plain(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.item()
    if isinstance(value, tuple):
        return list(value)
    return value


def rng_tensors(data_generator: torch.Generator) -> dict[str, torch.Tensor]:
    """Every random state the run draws from, as uint8 tensors."""
    out = {"rng.torch": torch.get_rng_state(), "rng.data": data_generator.get_state()}
    if torch.cuda.is_available():
        for i, state in enumerate(torch.cuda.get_rng_state_all()):
            out[f"rng.cuda.{i}"] = state
    return out


def restore_rng(tensors: dict[str, torch.Tensor], data_generator: torch.Generator) -> None:
    torch.set_rng_state(tensors["rng.torch"])
    data_generator.set_state(tensors["rng.data"])
    cuda = sorted(k for k in tensors if k.startswith("rng.cuda."))
    if cuda and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([tensors[k] for k in cuda][: torch.cuda.device_count()])
